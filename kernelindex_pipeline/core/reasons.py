"""Why a rerun or a claim check has no verdict, as a code beside its text.

Codes are data: targets, views and checks filter on them, never on the reason text. The harness writes
`reason_code` on every record that did not pass; `legacy_code` gives the code of records written before
it did, from their status and the harness's own wording of the time.
"""

from __future__ import annotations

# A provider on the rerun
UNAVAILABLE_PROVIDER = "unavailable_provider"  # a package, backend or device it needs is missing here
NO_RERUN_PROVIDER = "no_rerun_provider"  # no adapter builds it
TOO_LARGE = "too_large"  # the workload does not fit on the card
FAILED_CORRECTNESS = "failed_correctness"  # outputs or gradients beyond tolerance
RAISED = "raised"  # building or running it raised
FELL_BACK = "fell_back"  # it ran as something other than its label says (a compiled provider ran eager)
UNVERIFIED_PROVIDER = "unverified_provider"  # its record does not say what ran (a compiled provider's graphs)
TIMEOUT = "timeout"  # its pass did not finish within the target's time
OTHER_DTYPE = "other_dtype"  # re-measured only with tensors of another dtype than the source's script builds

# A claim check
NO_RERUN = "no_rerun"  # nothing re-measured yet for this claim
LATENCY_ONLY = "latency_only"  # peak memory under the source-replica protocol, which times latency only
UNSUPPORTED_MODE = "unsupported_mode"  # a pass the harness does not time
NO_SAMPLES = "no_samples"
TOO_FEW_REPETITIONS = "too_few_repetitions"
NO_INTERVAL = "no_interval"
NOISY = "noisy"
UNSUPPORTED_CARD = "unsupported_card"  # the pass needs another card (Liger's cuTile backend on sm_90)
PASSES_FIELD_RULE = "passes_field_rule"  # beyond the fixed tolerance, within the field's rule: awaiting a rerun
HOST_BOUND_HERE = "host_bound_here"  # the replica timed this session's slow host, not the card

# A source series that measured something other than its label
SOURCE_ARTIFACT = "source_artifact"

PROVIDER_CODES = (UNAVAILABLE_PROVIDER, NO_RERUN_PROVIDER, TOO_LARGE, FAILED_CORRECTNESS, RAISED, FELL_BACK,
                  UNVERIFIED_PROVIDER, TIMEOUT)
CLAIM_CODES = PROVIDER_CODES + (NO_RERUN, OTHER_DTYPE, LATENCY_ONLY, UNSUPPORTED_MODE, NO_SAMPLES,
                                TOO_FEW_REPETITIONS, NO_INTERVAL, NOISY, HOST_BOUND_HERE, PASSES_FIELD_RULE,
                                SOURCE_ARTIFACT, UNSUPPORTED_CARD)
# Codes a new rerun could settle (`claim_checks.awaiting_rerun` under the device-time protocol).
AWAITING = (NO_RERUN, OTHER_DTYPE, NO_SAMPLES, TOO_FEW_REPETITIONS, NO_INTERVAL, NOISY, TIMEOUT, UNVERIFIED_PROVIDER,
            HOST_BOUND_HERE, PASSES_FIELD_RULE, UNSUPPORTED_CARD)

_STATUS_CODES = {"unavailable": UNAVAILABLE_PROVIDER, "too_large": TOO_LARGE, "timeout": TIMEOUT}


def legacy_code(status: str | None, reason: str | None) -> str | None:
    """The code of a record that carries none: by its status, and for `failed` and `unavailable` by the
    harness's fixed wording (a correctness failure lists `rel_error`s; a crash says `raised` or `crashed`)."""
    if status in (None, "passed"):
        return None
    text = reason or ""
    if status == "unavailable" and text.startswith("no rerun provider for "):
        return NO_RERUN_PROVIDER
    if status in _STATUS_CODES:
        return _STATUS_CODES[status]
    if "rel_error" in text and "raised" not in text and "crashed" not in text:
        return FAILED_CORRECTNESS
    return RAISED
