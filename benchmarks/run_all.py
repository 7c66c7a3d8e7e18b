"""Run every benchmark in its own fresh interpreter and collect the results in results/latest.json.

    python benchmarks/run_all.py                 # all benchmarks
    python benchmarks/run_all.py nngp simulator  # only those whose name contains one of the words
    python benchmarks/run_all.py --markdown      # also write the peer tables into BENCHMARKS.md (peer_tables.py)

Each script's table is shown as it runs; the JSON holds the machine info,
a timestamp and each script's full result record.
"""
from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

HERE = Path(__file__).resolve().parent
WAIT_IDLE_S = 120  # each script first waits up to this long for an idle CPU
SCRIPTS = ["bench_nngp_response.py", "bench_rho_star.py", "bench_simulator.py", "bench_monte_carlo.py", "bench_stable_kernel.py",
           "bench_abcd.py",
           "bench_peers_nt.py", "bench_kernel_engine.py", "bench_peers_torch.py",  # the peers need benchmarks/.venv-peers (setup_peers.sh)
           "bench_fluctuations.py"]


def main(argv: list[str]) -> int:
    markdown = "--markdown" in argv
    argv = [a for a in argv if a != "--markdown"]
    chosen = [s for s in SCRIPTS if not argv or any(w in s for w in argv)]
    if not chosen:
        print(f"no benchmark matches {argv}; available: {SCRIPTS}")
        return 2
    info = C.machine_info()
    report = {"timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "machine": info, "benchmarks": {}, "failed": []}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for script in chosen:
            name = script.removeprefix("bench_").removesuffix(".py")
            out = Path(tmp) / f"{name}.json"
            print(f"\n=== {script} " + "=" * max(0, 60 - len(script)), flush=True)
            proc = subprocess.run([sys.executable, str(HERE / script), "--json", str(out),
                                   "--wait-idle", str(WAIT_IDLE_S)], cwd=HERE.parent)
            if proc.returncode != 0 or not out.exists():
                print(f"!!! {script} failed (exit code {proc.returncode})")
                report["failed"].append(script)
                continue
            rec = json.loads(out.read_text())
            own = rec.pop("machine", None) or {}  # the top-level record's, except the load sample and the commit:
            for key in ("resprop_commit", "resprop_sources_dirty"):  # a commit made during the run shows here
                if key in own:
                    rec[key] = own[key]
            report["benchmarks"][name] = rec
    report["total_wall_s"] = time.perf_counter() - t0
    dest = HERE / "results" / "latest.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {dest.relative_to(HERE.parent)} (total {report['total_wall_s']:.0f} s)")
    _summary(report)
    if markdown:
        from peer_tables import BENCHMARKS_MD, update_markdown
        print(f"updated {update_markdown(report) or 'nothing'} in {BENCHMARKS_MD.name}")
    return 1 if report["failed"] else 0


def _summary(report: dict) -> None:
    b = report["benchmarks"]
    rows = []
    if "nngp_response" in b:
        r = b["nngp_response"]
        rows += [["nngp P=1000 L=200: resprop", f"{r['resprop']['best_s']:.3f} s",
                  f"{r['resprop']['peak_MiB']:.1f} MiB"],
                 ["nngp P=1000 L=200: naive NumPy", f"{r['naive']['best_s']:.3f} s",
                  f"{r['naive']['peak_MiB']:.1f} MiB"],
                 ["  naive / resprop", f"{r['speed_ratio_naive_over_resprop']:.2f}x",
                  f"max rel err {max(r['max_rel_err'].values()):.1e}"]]
    if "rho_star" in b:
        r = b["rho_star"]
        rows += [["chi_out_curves 64 x 256", f"{r['chi_out_curves']['best_s']:.3f} s", ""],
                 ["rho_star 64 depths", f"{r['rho_star']['best_s']:.3f} s", ""],
                 ["response() loop, extrapolated", f"{r['loop_extrapolated_s']:.1f} s",
                  f"{r['speed_ratio_loop_over_chi_out_curves']:.0f}x slower"]]
    if "simulator" in b:
        for P, o in b["simulator"]["results"].items():
            for m in ("reduced", "dense"):
                rows.append([f"simulator {P} {m} ({o[m]['samples']} samples)",
                             f"{o[m]['best_s']:.3f} s", f"{o[m]['throughput_layer_neuron_samples_per_s']:.3e} /s"])
            rows.append([f"  {P} reduced / dense", f"{o['throughput_ratio_reduced_over_dense']:.0f}x", ""])
    if "monte_carlo" in b:
        r = b["monte_carlo"]
        for size, o in r["results"].items():
            for m in ("reduced", "dense", "peer"):
                rows.append([f"monte_carlo {size} {m} ({o[m]['samples']} samples)",
                             f"{o[m]['best_s']:.3f} s", f"{o[m]['throughput_layer_neuron_samples_per_s']:.3e} /s"])
            rows.append([f"  {size} reduced / dense, / peer", f"{o['dense']['ratio_reduced_over_this']:.0f}x, "
                         f"{o['peer']['ratio_reduced_over_this']:.0f}x", ""])
        for name, v in r["var_G_to_1pct"].items():
            rows.append([f"Var[G] to 1% RSE n=d=100 {name}", f"{v['best_s']:.2f} s",
                         f"{v['samples']} samples, Var[G] = {v['var_G']:.3f}"])
    if "abcd" in b:
        r = b["abcd"]
        rows += [[f"abcd exact solve ({r['params']['systems']} systems, {r['params']['cases']} cases)",
                  f"{r['exact_solve']['best_s']:.3f} s", ""],
                 [f"abcd LP cross-check (+ {r['params']['points']} points)", f"{r['lp_cross_check']['best_s']:.3f} s",
                  "agrees" if r["agree"] else "DISAGREES"]]
    if "peers_nt" in b:
        r = b["peers_nt"]
        if "skipped" in r:
            rows.append(["neural-tangents peer", "skipped", r["skipped"]])
        else:
            for key, o in r["results"].items():
                if "P1000_L200" in key:
                    rows.append([f"NT peer {key.replace('_P1000_L200_', ' P=1000 L=200 ')}",
                                 f"{o['resprop']['best_s']:.3f} s",
                                 f"NT f32 {o['nt_f32']['best_s']:.2f} s ({o['ratio_nt_f32_over_resprop']:.1f}x), "
                                 f"f64 {o['nt_f64']['best_s']:.2f} s ({o['ratio_nt_f64_over_resprop']:.1f}x), "
                                 f"off-diag rel diff {o['max_rel_err_vs_nt_f64_offdiag']:.0e}"])
    if "peers_torch" in b:
        r = b["peers_torch"]
        if "skipped" in r:
            rows.append(["PyTorch dense peer", "skipped", r["skipped"]])
        else:
            rows.append([f"torch dense n=d=100 ({r['params']['samples']} samples)", f"{r['torch']['best_s']:.2f} s",
                         f"reduced {r['resprop_reduced']['best_s']:.3f} s: {r['ratio_reduced_over_torch']:.0f}x, "
                         f"E[G] z = {r['mean_G_z']:+.1f}"])
    if rows:
        print()
        C.print_table(["summary", "time / ratio", "note"], rows)
    load = _others(report["benchmarks"])
    if load:
        bad = sum(v > C.CONTENDED for v in load)
        print(f"\nother processes during timed calls: up to {max(load):.2f} cores busy; "
              f"{bad} of {len(load)} timed calls contended (> {C.CONTENDED} cores)"
              + ("  -- contended calls were repeated where possible; check uncontended_calls in the JSON"
                 if bad else ""))


def _others(x) -> list[float]:
    """Every ``others_busy_cores`` sample anywhere in the report."""
    if isinstance(x, dict):
        return [v for k, val in x.items() for v in (
            [u for u in val if u is not None] if k == "others_busy_cores" else _others(val))]
    if isinstance(x, list):
        return [v for val in x for v in _others(val)]
    return []


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
