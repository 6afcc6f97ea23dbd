"""The site's way in: the index page (every comparison group by kernel, with filters and a search box that
run in the page, offline too), the machine-readable run index split per kernel, and the search shards the
box loads.

Layout (under the export's directory):
    index.json                  the run index's table of contents: each kernel, its runs, its file
    index/<kernel>.json         one entry per run of the kernel: ids, title, group, digest, manifest file
    search/ids/<xx>.js          run ids, run digests and published identifiers whose hex digits begin xx,
                                each with the run it leads to
    search/kernels/<kernel>.js  the kernel's external ids, each with its run

The search shards are scripts, not JSON, so that a page opened from file:// can load them.
"""

from __future__ import annotations

import json
from collections import defaultdict

from kernelindex_pipeline.site.frame import escape as _e, page
from kernelindex_pipeline.site.glossary import GLOSSARY_PAGE, term_link
from kernelindex_pipeline.site.pages import kernel_slug
from kernelindex_pipeline.core.identity import API_VERSION

INDEX_SQL = """
SELECT r.run_id, r.external_id, r.title, r.kernel, r.operation_mode, r.provider, r.metric, r.gpu, r.form_factor,
    r.workload_slug, r.observed_at, r.evidence_level, r.status, r.comparison_key, k.rank, k.group_size,
    r.withdrawn_upstream, m.run_digest
FROM runs r JOIN run_manifests m USING (run_id) LEFT JOIN ranks k USING (run_id)
ORDER BY r.kernel, r.run_id
"""

# Every key the search box takes that is made of hex digits, with the run it leads to: run ids, run digests,
# and the published identifiers that lead to a run (published_identifiers, where the warehouse has it).
SEARCH_IDS_SQL = """
SELECT run_id AS key, run_id FROM runs
UNION ALL SELECT run_digest, run_id FROM run_manifests
{published}
ORDER BY key
"""
PUBLISHED_SEARCH_SQL = "UNION ALL SELECT identifier, run_id FROM published_identifiers WHERE run_id IS NOT NULL"
FETCH_ROWS = 10_000


def kernel_file(kernel: str) -> str:
    return kernel_slug(kernel).lower()


def run_index_files(con) -> dict[str, str]:
    """index.json (a kernel per entry) and index/<kernel>.json (a run per line, by run id), by path."""
    cursor = con.execute(INDEX_SQL)
    names = [d[0] for d in cursor.description]
    lines: dict[str, list[str]] = defaultdict(list)
    while rows := cursor.fetchmany(FETCH_ROWS):
        for row in rows:
            entry = dict(zip(names, row))
            entry["observed_at"] = entry["observed_at"].isoformat()
            entry["manifest"] = f"runs/{entry['run_id']}.json"
            lines[entry["kernel"]].append(json.dumps(entry, ensure_ascii=False))
    files = {f"index/{kernel_file(kernel)}.json": (
        f'{{"apiVersion": "{API_VERSION}", "kind": "RunIndex", "kernel": {json.dumps(kernel)}, "runs": [\n'
        + ",\n".join(entries) + "\n]}\n") for kernel, entries in lines.items()}
    contents = [{"kernel": kernel, "runs": len(entries), "file": f"index/{kernel_file(kernel)}.json"}
                for kernel, entries in sorted(lines.items())]
    files["index.json"] = json.dumps({"apiVersion": API_VERSION, "kind": "RunIndexContents",
                                      "runs": sum(c["runs"] for c in contents), "kernels": contents},
                                     ensure_ascii=False, indent=1) + "\n"
    return files


def search_files(con, with_published: bool) -> dict[str, str]:
    """The search box's shards, by path: hex keys by their first two hex digits, external ids by kernel."""
    shards: dict[str, list] = defaultdict(list)
    cursor = con.execute(SEARCH_IDS_SQL.format(published=PUBLISHED_SEARCH_SQL if with_published else ""))
    while rows := cursor.fetchmany(FETCH_ROWS):
        for key, run_id in rows:
            shards[key.removeprefix("sha256:")[:2]].append([key, run_id])
    files = {f"search/ids/{shard}.js": f"kiSearch.ids({json.dumps(shard)}, {json.dumps(pairs)});\n"
             for shard, pairs in shards.items()}
    by_kernel: dict[str, list] = defaultdict(list)
    cursor = con.execute("SELECT kernel, external_id, run_id FROM runs ORDER BY kernel, external_id")
    while rows := cursor.fetchmany(FETCH_ROWS):
        for kernel, external_id, run_id in rows:
            by_kernel[kernel_file(kernel)].append([external_id, run_id])
    files.update({f"search/kernels/{name}.js": f"kiSearch.kernel({json.dumps(name)}, {json.dumps(pairs, ensure_ascii=False)});\n"
                  for name, pairs in by_kernel.items()})
    return files


def kernel_rows(groups: list[tuple[str, dict, int]], providers: dict[str, list[str]],
                runs: dict[str, int], titles: dict[str, str]) -> list[dict]:
    """Per kernel (every kernel with runs): its title, its groups with ranked runs, its runs, and the cards,
    protocols and providers of its groups."""
    rows = {kernel: {"kernel": kernel, "title": titles.get(kernel, kernel), "groups": 0, "runs": count,
                     "cards": set(), "protocols": set(), "providers": set()} for kernel, count in runs.items()}
    for slug, leader, _ in groups:
        row = rows[leader["kernel"]]
        row["groups"] += 1
        row["cards"].add(leader["card"])
        row["protocols"].add(leader["protocol"])
        row["providers"].update(providers.get(slug, []))
    return [{**row, **{k: sorted(row[k]) for k in ("cards", "protocols", "providers")}}
            for _, row in sorted(rows.items())]


# The claims a kernel's row counts, by verdict (under either protocol).
INDEX_VERDICTS = ("held", "reversed", "indistinguishable")


def _nowrap(text: str) -> str:
    return f"<span class=\"nw\">{_e(text)}</span>"


def index_page(kernels: list[dict], counts: dict[str, dict[tuple[str, str], int]]) -> str:
    """A row per kernel (its groups, runs, cards, protocols, providers and claims by verdict), with the
    filters (kernel, GPU, protocol, provider), whose state the URL keeps, and a search box that finds runs by
    their identifiers and kernels by name, provider or card. Each kernel's groups are on its own page."""
    rows = []
    for k in kernels:
        verdicts = counts.get(k["kernel"], {})
        claims = "".join(f"<td class=\"n\">{sum(c for (_, verdict), c in verdicts.items() if verdict == v) or ''}</td>"
                         for v in INDEX_VERDICTS)
        rows.append(
            f"<tr data-kernel=\"{_e(k['kernel'])}\" data-gpu=\"{_e('|'.join(k['cards']))}\" "
            f"data-protocol=\"{_e('|'.join(k['protocols']))}\" data-provider=\"{_e('|'.join(k['providers']))}\">"
            f"<td><a href=\"kernels/{_e(kernel_slug(k['kernel']))}.html\">{_e(k['kernel'])}</a>"
            f"<br><span class=\"muted\">{_e(k['title'])}</span></td>"
            f"<td class=\"n\">{k['groups']}</td><td class=\"n\">{k['runs']}</td>{claims}"
            f"<td>{'<br>'.join(_nowrap(c) for c in k['cards'])}</td>"
            f"<td>{', '.join(_e(p) for p in k['providers'])}</td></tr>")
    verdict_heads = "".join(f"<th>{term_link(v, 0)}</th>" for v in INDEX_VERDICTS)
    body = ("<h1>KernelIndex</h1><p>The Liger-Kernel benchmark runs, by kernel: each kernel's page ranks its "
            "comparison groups and says which of its source's claims held. Verdicts, protocols and statuses: "
            f"<a href=\"{GLOSSARY_PAGE}\">glossary</a>. Every run, machine-readable: "
            "<a id=\"run-index\" href=\"index.json\">index.json</a> (a file per kernel).</p>" + INDEX_FORMS
            + "<table class=\"kernels\"><thead><tr><th>kernel</th><th>groups</th><th>runs</th>" + verdict_heads
            + "<th>GPU</th><th>providers</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>" + INDEX_SCRIPT)
    return page("KernelIndex · kernels", body, 0)


INDEX_FORMS = (
    "<form id=\"search\" role=\"search\"><label for=\"q\">Find</label> <input id=\"q\" name=\"q\" type=\"search\" "
    "size=\"34\" placeholder=\"a run's id, a kernel, provider or GPU\" autocomplete=\"off\"> "
    "<button>Find</button><ul id=\"search-results\"></ul></form>"
    "<form id=\"filters\">"
    + "".join(f"<label>{label} <input id=\"f-{name}\" name=\"{name}\" list=\"l-{name}\" size=\"14\" placeholder=\"all\">"
              f"<datalist id=\"l-{name}\"></datalist></label> "
              for name, label in (("kernel", "kernel"), ("gpu", "GPU"), ("protocol", "protocol"), ("provider", "provider")))
    + "<span id=\"f-count\" class=\"muted\"></span><span id=\"f-none\" class=\"warning\"></span></form>")

# Filters: a value matches the options equal to it, ignoring case, or failing that the options containing it
# ("h200" is both H200 cards); a value matching nothing says so and shows no kernel. The filters and the
# search are kept in the URL's query (?kernel=...&gpu=...&q=...), so a filtered index or a search can be
# linked. The search loads the shard that can hold a run's identifier (search/ids/<xx>.js for hex
# identifiers, search/kernels/<kernel>.js for external ids, which begin with their kernel); any other text
# finds the kernels whose name, providers or cards contain it.
INDEX_SCRIPT = """<script>
const rows = [...document.querySelectorAll('tr[data-kernel]')];
const listed = text => text ? text.split('|') : [];
const filters = {kernel: r => [r.dataset.kernel], gpu: r => listed(r.dataset.gpu),
                 protocol: r => listed(r.dataset.protocol), provider: r => listed(r.dataset.provider)};
const options = {};
const params = new URLSearchParams(location.search);
for (const [name, values] of Object.entries(filters)) {
  options[name] = [...new Set(rows.flatMap(values))].filter(Boolean).sort();
  const list = document.getElementById('l-' + name);
  for (const v of options[name]) list.append(new Option(v, v));
  const input = document.getElementById('f-' + name);
  input.value = params.get(name) || '';
  input.addEventListener('input', apply);
}
function chosen(name) {
  const want = document.getElementById('f-' + name).value.trim().toLowerCase();
  if (!want) return null;
  const exact = options[name].filter(v => v.toLowerCase() === want);
  return new Set(exact.length ? exact : options[name].filter(v => v.toLowerCase().includes(want)));
}
function keepInUrl() {
  const query = new URLSearchParams();
  for (const name of [...Object.keys(filters), 'q']) {
    const value = document.getElementById(name === 'q' ? 'q' : 'f-' + name).value.trim();
    if (value) query.set(name, value);
  }
  const search = query.toString();
  history.replaceState(null, '', search ? '?' + search : location.pathname);
}
function apply() {
  const sets = Object.fromEntries(Object.keys(filters).map(name => [name, chosen(name)]));
  const none = Object.entries(sets).filter(([, set]) => set && !set.size).map(([name]) =>
    'no ' + name + ' matches \\u201c' + document.getElementById('f-' + name).value.trim() + '\\u201d');
  let shown = 0;
  for (const r of rows) {
    const keep = Object.entries(filters).every(([name, values]) => !sets[name] || values(r).some(v => sets[name].has(v)));
    r.hidden = !keep; shown += keep;
  }
  document.getElementById('f-count').textContent = shown + ' of ' + rows.length + ' kernels';
  document.getElementById('f-none').textContent = none.length ? ' · ' + none.join('; ') : '';
  keepInUrl();
}
const shards = {ids: {}, kernels: {}};
window.kiSearch = {ids: (name, pairs) => { shards.ids[name] = pairs; }, kernel: (name, pairs) => { shards.kernels[name] = pairs; }};
function load(kind, name) {
  if (name in shards[kind]) return Promise.resolve(shards[kind][name]);
  return new Promise(done => {
    const script = document.createElement('script');
    script.src = 'search/' + kind + '/' + encodeURIComponent(name) + '.js';
    script.onload = () => done(shards[kind][name] || []);
    script.onerror = () => { shards[kind][name] = []; done([]); };
    document.head.append(script);
  });
}
async function find(text) {
  const query = text.trim().replace(/(\\u2026|\\.\\.\\.)$/, '');
  const out = document.getElementById('search-results');
  out.replaceChildren();
  keepInUrl();
  if (!query) return;
  const lower = query.toLowerCase();
  let found = [];
  const hex = lower.match(/^(sha256:)?([0-9a-f]{2,})$/);
  if (hex) {
    const pairs = await load('ids', hex[2].slice(0, 2));
    found = pairs.filter(([key]) => key.startsWith(lower) || (key.startsWith('sha256:') && lower.startsWith(key)));
  }
  if (!found.length && query.includes('/')) {
    const kernel = lower.split('/')[0].replace(/[^a-z0-9_.-]/g, '_').replace(/^\\.+/, '') || '_';
    const pairs = await load('kernels', kernel);
    found = pairs.filter(([key]) => key.toLowerCase().startsWith(lower));
  }
  found = found.map(([key, run]) => [key, 'runs/' + run + '.html', ' \\u2192 run ' + run.slice(0, 8)]);
  if (!found.length) {
    for (const r of rows) {
      const link = r.querySelector('a');
      for (const [name, values] of Object.entries(filters)) {
        const hit = values(r).find(v => v.toLowerCase().includes(lower));
        if (hit) { found.push([r.dataset.kernel, link.getAttribute('href'), name === 'kernel' ? '' : ' \\u00b7 ' + name + ' ' + hit]); break; }
      }
    }
  }
  for (const [key, href, note] of found.slice(0, 20)) {
    const item = document.createElement('li');
    const link = document.createElement('a');
    link.href = href;
    link.textContent = key;
    item.append(link, note);
    out.append(item);
  }
  const note = document.createElement('li');
  note.className = 'muted';
  note.textContent = !found.length ? 'Nothing matches \\u201c' + query + '\\u201d.' :
    found.length > 20 ? (found.length - 20) + ' more; type more of it.' : '';
  if (note.textContent) out.append(note);
}
document.getElementById('q').value = params.get('q') || '';
document.getElementById('search').addEventListener('submit', event => { event.preventDefault(); find(document.getElementById('q').value); });
apply();
if (params.get('q')) find(params.get('q'));
</script>"""
