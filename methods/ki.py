"""KI: knowledge inheritance (Qin et al. 2021, "Knowledge Inheritance for Pre-trained Language Models"; a
baseline of the LiGO paper, §4.1, where its savings come out negative: the teacher's forwards cost more than
the distillation saves).

The large model starts from random init and minimises

    (1 - a_t) * task loss + a_t * T^2 * KL(softmax(teacher / T) || softmax(student / T))

with the KL averaged over the positions the task scores: the masked tokens (MLM), every token (CLM), the class
logits (images): the student's and the teacher's logits where the loss computes them (`Family.head_logits`). a_t falls linearly from 1 to 0 over `decay_fraction` of training (KI: 55K of 125K steps) and
stays 0 afterwards, where the teacher no longer runs and the loss is exactly the task loss. The temperature
defaults to 1 (assumed). The teacher is the pretrained small model, in eval mode and without gradients; its
forward FLOPs are charged to the ledger's `teacher` phase.

Distillation lives in the loss (DeiT style, DESIGN §7): the student's logits are taken from its one forward
pass by a forward hook, so the student does not run twice.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from methods.base import Config, GrowthMethod
from methods.depth import small_canonical
from methods.registry import MAIN_COMPARISONS, register_method
from models import family_of
from tasks.rules import above, in_range


@dataclass
class KIConfig(Config):
    decay_fraction: float = 55 / 125   # share of training over which a_t falls from 1 to 0
    temperature: float = 1.0
    RULES = {"decay_fraction": in_range(0, 1), "temperature": above(0)}


@register_method("ki")
class KI(GrowthMethod):
    display_name = "KI"
    color = "tab:purple"
    table_order = 4
    sweeps = MAIN_COMPARISONS

    Config = KIConfig
    trains_with_small = True           # the teacher: a resumed run needs it again

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.teacher = None
        self._student_logits = None
        # a plain function, not a bound method: a deep copy of the student keeps calling this instance
        self._hook = lambda module, args, output: self._capture(module, output)

    def grow(self, small, task):
        self._set_teacher(small, task)
        return task.build_large()

    def resume_model(self, small, task, stage):
        self._set_teacher(small, task)
        return task.build_large()

    def _set_teacher(self, small, task):
        small_canonical(small, task)   # the same checks as every method that grows from it
        self.teacher = small.eval().requires_grad_(False)
        self.family = family_of(small)
        self.teacher_spec = self.family.spec_of(small)

    def weight(self, step: int, total_steps: int) -> float:
        """a_t: 1 at step 0, falling linearly to 0 at decay_fraction x total_steps, then 0."""
        span = self.config.decay_fraction * total_steps
        return max(0.0, 1.0 - step / span) if span > 0 else 0.0

    def enter_stage(self, model, stage, task):
        if self._hook not in model._forward_hooks.values():
            model.register_forward_hook(self._hook)
        return model

    def _capture(self, module, output):
        if module.training:            # evaluation forwards are not distilled
            self._student_logits = output.logits if hasattr(output, "logits") else output

    def extra_loss(self, model, batch, task_loss, step, total_steps, ledger):
        a = self.weight(step, total_steps)
        student, self._student_logits = self._student_logits, None
        if a == 0:
            return task_loss
        if student is None:
            raise RuntimeError("ki: the student's logits were not captured; was enter_stage called on this model?")
        if next(self.teacher.parameters()).device != student.device:
            self.teacher.to(student.device)
        with torch.no_grad():
            teacher = self.family.head_logits(self.teacher, batch)     # the positions the student's loss decoded
        ledger.add("teacher", self.family.batch_flops(self.teacher_spec, batch).total)
        if student.shape != teacher.shape:
            raise RuntimeError(f"ki: student logits {tuple(student.shape)} and teacher logits {tuple(teacher.shape)} "
                               "cover different positions")
        student, teacher = student.reshape(-1, student.shape[-1]), teacher.reshape(-1, teacher.shape[-1])
        T = self.config.temperature
        kd = F.kl_div(F.log_softmax(student.float() / T, -1), F.log_softmax(teacher.float() / T, -1),
                      log_target=True, reduction="batchmean") * T * T
        return (1 - a) * task_loss + a * kd
