"""Issue 35's proof in the README: the real-model subsection of README.md is the one
benchmarks/real_models.py writes from its results.json (no figure typed by hand), its pictures are
committed and small, and gradcli's measured rows meet the issue's legibility targets."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("real_models", ROOT / "benchmarks" / "real_models.py")
real_models = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(real_models)
RESULTS = json.loads((ROOT / "benchmarks" / "real_models" / "results.json").read_text(encoding="utf-8"))


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(real_models.BEGIN) + len(real_models.BEGIN) + 1
    return text[start : text.index(real_models.END) - 1]


def test_the_readme_subsection_is_the_one_the_benchmark_writes_from_its_results():
    section = _section()
    assert section == real_models.readme_section(RESULTS)
    assert section.startswith("### Real models beside torchview and torchlens\n")
    row = RESULTS["runs"]["gpt2-12L-16t/gradcli"]
    w, h = row["pixels"]
    assert f"| gpt2-12L-16t | **gradcli** | {row['seconds']:.1f} s | {row['peak_mb']:.0f} MB" in section
    assert f"| {w}×{h} | {row['nodes']} ({row['boxes']}) | {row['text_px']:.1f} px |" in section


def test_the_readme_shows_gpt2_and_the_gru_loop_by_gradcli_torchview_and_torchlens_in_small_pictures():
    pictures = re.findall(r'<img src="([^"]+)"', _section())
    for model in ("gpt2-12L-16t", "gru-6x20"):
        for tool in ("gradcli", "torchview", "torchlens"):
            assert f"benchmarks/real_models/{model}_{tool}.png" in pictures
    for picture in pictures:
        assert (ROOT / picture).stat().st_size < 400_000, picture


def test_gradcli_draws_every_model_readable_uncut_and_grouped():
    for model in real_models.MODELS:
        row = RESULTS["runs"][f"{model}/gradcli"]
        assert "error" not in row, (model, row.get("error"))
        assert row["text_px"] >= 10 and max(row["pixels"]) <= 8000, (model, row["text_px"], row["pixels"])
        assert not any("drawn at" in w for w in row["warnings"]), (model, row["warnings"])
        assert not row.get("hidden"), (model, row.get("hidden"))
    # the blocks drawn once (×12, ×48), nothing cut: 12 or 48 blocks, 16 or 128 tokens, the same nodes drawn
    drawn = {
        RESULTS["runs"][f"{m}/gradcli"]["nodes"]
        for m in real_models.TORCH_MODELS
        if m.startswith("gpt2-") and "-2L" not in m
    }
    assert len(drawn) == 1, drawn
