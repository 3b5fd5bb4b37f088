"""Architecture families of networks: what "a network the model never saw" means at the family level.

A family is the torchvision builder family: resnet, resnext and wide_resnet (which torchvision
builds in one module but are different designs), densenet, efficientnet (v1 and v2), mobilenet (v2,
v3), regnet, convnext, vit, swin (v1, v2), and so on. Leave-one-family-out scores hold out every op
of every network of a family, so no sibling of the held-out network is seen in training.
"""

from __future__ import annotations

import re

# Checked in order: the first matching prefix names the family.
_PREFIXES = (
    ("wide_resnet", "wide_resnet"),
    ("resnext", "resnext"),
    ("resnet", "resnet"),
    ("densenet", "densenet"),
    ("efficientnet", "efficientnet"),
    ("mobilenet", "mobilenet"),
    ("mnasnet", "mnasnet"),
    ("regnet", "regnet"),
    ("convnext", "convnext"),
    ("vit", "vit"),
    ("swin", "swin"),
    ("maxvit", "maxvit"),
    ("shufflenet", "shufflenet"),
    ("squeezenet", "squeezenet"),
    ("googlenet", "googlenet"),
    ("inception", "inception"),
    ("alexnet", "alexnet"),
    ("vgg", "vgg"),
)


def family_of(model: str) -> str:
    """`resnet50` -> `resnet`, `swin_v2_t` -> `swin`; other names: their leading word."""
    for prefix, family in _PREFIXES:
        if model.startswith(prefix):
            return family
    return re.split(r"[_\d]", model, maxsplit=1)[0] or model
