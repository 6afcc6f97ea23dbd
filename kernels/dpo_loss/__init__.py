"""DPO loss: the direct preference loss over a trained LM head and a frozen reference head, without
materialized logits.

Its workloads were published before the family had a spec, under the generic title ("Dpo loss") and with
their input tensors unknown; the spec keeps both (``shapes_published=False``), so that no published byte
changes, and gives the shapes for the reruns only: the trained head's x, weight, bias and targets, and the
reference head's hidden states ``ref_x`` and weight (benchmark_dpo_loss.py builds the reference head without
a bias). ``batch`` counts sequences, chosen and rejected together (the script's B): x's rows are ``batch``
sequences of ``seq`` tokens, the first half chosen, the second half rejected.
"""

from kernels.shapes import preference
from kernels.spec import spec


def _dpo_tensors(p):
    """The preference LM head's inputs, its bias where the workload has one, and the reference head's."""
    rows = p["batch"] * p["seq"]
    shapes = dict(preference(p))
    if str(p.get("bias", False)).lower() == "true":
        shapes["bias"] = [p["vocab"]]
    shapes["ref_x"] = [rows, p["hidden"]]
    shapes["ref_weight"] = [p["vocab"], p["hidden"]]
    return shapes


SPEC = spec("dpo_loss", "Dpo loss", tensors=_dpo_tensors, shapes_published=False)
