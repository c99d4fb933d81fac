"""Experiments and controls beside the sweeps: each asks one scientific question of the records or of a few runs
(the no-growth control, the regime probe, the depth probe, LiGO's start quality, the MLM targets' rate) and writes its
answer under bench/results."""
