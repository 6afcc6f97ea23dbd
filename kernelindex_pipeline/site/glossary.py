"""The site's words for what the reruns found: the glossary page, and how pages write a claim, a verdict
(linked to its definition) and verdict counts. One definition per term; every page links here."""

from __future__ import annotations

from kernelindex_pipeline.core.catalog import (
    CONTROLLED,
    PROTOCOL_NAMES,
    RERUN_FAMILY,
    SOURCE_FAMILY,
    SOURCE_NATIVE,
    SOURCE_REPLICA_FAMILY,
)
from kernelindex_pipeline.site.frame import escape as _e, page

GLOSSARY_PAGE = "glossary.html"
VERDICTS = ("held", "reversed", "indistinguishable", "not re-checked")
ORDERED, PARITY = "ordered", "parity"
RUN_STATUSES = ("passed", "failed", "unavailable", "too_large")

# (anchor, term, definition): the order the page lists them in.
TERMS = (
    ("claim", "source claim", "An ordered pair (a, b) of implementations ranked in one of the source's comparison "
     "groups. It is <em>ordered</em> when the source ranks a ahead of b by more than 2% (a's median is lower: "
     "faster, or smaller), a <em>parity</em> claim when their medians are within 2%. Pages name both "
     "implementations: "
     "“Liger faster than Transformers”, “Liger and Transformers at parity”."),
    (ORDERED, "ordered claim", "The source says a is faster (or uses less memory) than b: its ratio b / a lies "
     "outside the ±2% parity band."),
    (PARITY, "parity claim", "The source measured a and b within 2% of each other: its ratio b / a lies inside "
     "the parity band."),
    ("held", "held", "KernelIndex's reruns agree with the claim: the 95% interval of the rerun ratio b / a "
     "(pooled over independent sessions, with the drift within and between them) lies wholly beyond the ±2% "
     "parity band on the side the source claims; for a parity claim, wholly inside the band."),
    ("reversed", "reversed", "The reruns contradict the claim: the interval lies wholly beyond the parity band on "
     "the other side (for a parity claim: wholly outside the band)."),
    ("indistinguishable", "indistinguishable", "The reruns cannot tell a from b: the interval overlaps the ±2% "
     "parity band (for a parity claim: reaches past one of its edges), with steady samples."),
    ("not-re-checked", "not re-checked", "No verdict, and the reason (with its code) is given: no rerun of the "
     "kernel, workload or provider yet; a provider unavailable, failing correctness or running something "
     "other than its label (a torch.compile that fell back to eager) on KernelIndex's GPU; an interval that "
     "overlaps the band from samples too noisy to call them the same (a relative p20–p80 spread over 0.25); "
     "too few repetitions; or a metric the protocol does not time."),
    ("source-artifact", "source artifact", "The source's run measured something other than its label: a "
     "torch.compile series that times as eager PyTorch at some shapes while far from it at others, as after "
     "dynamo's recompile limit. The claims it takes part in say what the reruns found for each provider."),
    ("host-bound", "host-bound", "The two rerun protocols give the claim different verdicts: the order the "
     "source published comes from host overhead (Python, launches), which the source's harness times, rather "
     "than from the kernels on the device."),
    (PROTOCOL_NAMES[SOURCE_FAMILY], PROTOCOL_NAMES[SOURCE_FAMILY], "The source's own benchmark scripts on the "
     "source's GPUs: Triton's do_bench, median with p20/p80, host overhead included. Every source-native run."),
    (PROTOCOL_NAMES[RERUN_FAMILY], PROTOCOL_NAMES[RERUN_FAMILY], "KernelIndex's rerun protocol: CUDA-event device "
     "time, L2 flushed between repetitions, providers interleaved, per-repetition samples kept."),
    (PROTOCOL_NAMES[SOURCE_REPLICA_FAMILY], PROTOCOL_NAMES[SOURCE_REPLICA_FAMILY], "The source's harness "
     "replayed on KernelIndex's GPU: do_bench with the source's quantiles and repetition budget, host "
     "overhead included."),
    ("same_card", "same card", "The rerun that decided the verdict ran on the claim's own card: the model and "
     "form factor the source measured on. Verdicts are checked on their own card first."),
    ("same_model", "same model", "No rerun on the claim's own card yet: the verdict's rerun ran on the same model "
     "in another form factor (an H100 SXM for an H100 NVL claim, say)."),
    ("other_card", "other card", "Neither the claim's card nor its model has been re-measured yet: the verdict "
     "comes from reruns on another card, named beside it, and says how the kernels compare there."),
    (SOURCE_NATIVE, SOURCE_NATIVE, "Evidence as the source published it."),
    (CONTROLLED, "KernelIndex-controlled", "Evidence KernelIndex measured itself, under a published "
     "protocol, on a stated environment."),
    ("gpu", "GPU (card)", "A model and its form factor, e.g. NVIDIA H100 80GB HBM3, NVIDIA H100 NVL and NVIDIA "
     "H100 PCIe: three cards of one model, three environments, never ranked together."),
    ("comparison-group", "comparison group", "Runs of one kernel, pass, metric, workload, GPU card and protocol; "
     "each implementation is represented by its newest run still listed upstream, and ranked by median."),
    ("passed", "passed", "The run was measured."),
    ("failed", "failed", "The provider's outputs or gradients missed the tolerance against the reference, so it "
     "was not timed; its page gives the errors."),
    ("unavailable", "unavailable", "The provider could not run on KernelIndex's machine (its package is missing, "
     "or does not build for the GPU); the reason is on its page."),
    ("too_large", "too_large", "The workload does not fit one GPU of KernelIndex's."),
)
ANCHORS = {term: anchor for anchor, term, _ in TERMS} | {anchor: anchor for anchor, _, _ in TERMS}


def term_link(term: str, depth: int, text: str | None = None) -> str:
    """`term` (a verdict, claim type, protocol or status) linked to its glossary entry."""
    anchor = ANCHORS.get(term)
    label = _e(text if text is not None else term)
    if anchor is None:
        return label
    return f"<a class=\"term\" href=\"{'../' * depth}{GLOSSARY_PAGE}#{anchor}\">{label}</a>"


def claim_type(check: dict) -> str:
    """`ordered` or `parity`: the table's claim_type where it has one, else from the two source medians."""
    return check.get("claim_type") or (PARITY if check["source_a_median"] == check["source_b_median"] else ORDERED)


def outcome(check: dict) -> str:
    """What the verdict says of its claim: a parity claim's `held` reads "at parity", its `reversed` "not at
    parity" (the views' `outcome`)."""
    if claim_type(check) == PARITY and check["verdict"] in ("held", "reversed"):
        return "at parity" if check["verdict"] == "held" else "not at parity"
    return check["verdict"]


def claim_text(check: dict) -> str:
    """The claim with both implementations named."""
    a, b = check["a_implementation"], check["b_implementation"]
    return f"{a} and {b} at parity" if claim_type(check) == PARITY else f"{a} faster than {b}"


def verdict_counts(counts: dict[tuple[str, str], int], depth: int) -> str:
    """A table of claims by protocol and verdict (`counts`: (protocol, verdict) -> claims), each verdict linked."""
    if not counts:
        return "<p class=\"muted\">No source claims here.</p>"
    protocols = sorted({p for p, _ in counts})
    head = "".join(f"<th>{term_link(v, depth)}</th>" for v in VERDICTS)
    rows = "".join(f"<tr><td>{term_link(p, depth)}</td>"
                   + "".join(f"<td>{counts.get((p, v), 0)}</td>" for v in VERDICTS) + "</tr>" for p in protocols)
    return (f"<table class=\"verdicts\"><thead><tr><th>protocol</th>{head}</tr></thead><tbody>{rows}</tbody></table>")


def glossary_page() -> str:
    """The glossary: every term a page's verdicts, claims, protocols and statuses use."""
    items = "".join(f"<dt id=\"{_e(anchor)}\">{_e(term)}</dt><dd>{definition}</dd>" for anchor, term, definition in TERMS)
    body = ("<h1>Glossary</h1><p>What the verdicts, claims, protocols and run statuses on KernelIndex's pages mean. "
            "Verdicts compare orders and ratios measured side by side on one GPU, never absolute times across "
            f"GPUs.</p><dl class=\"glossary\">{items}</dl>")
    return page("Glossary · KernelIndex", body, 0)
