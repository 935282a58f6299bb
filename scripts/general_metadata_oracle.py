#!/usr/bin/python3
"""By hand, not in CI: records what gguf-py's own metadata code (in the llama.cpp source that npm
node-llama-cpp@3.21.1 bundles) makes of tests/data/model_cards/cases.json, for
tests/general_metadata_test.cpp: get_model_id_components of each id, PyYAML's reading of each
model card's front matter (Metadata.load_model_card), and the general.* keys convert_hf_to_gguf.py
writes for each folder (Metadata.load, then ModelBase.prepare_metadata's fallbacks, then
set_gguf_meta_model; with the case's --metadata file and --model-name where it has them), each key as gguf-py packs it (type and value, hex), or "error" where gguf-py
raises. Needs Debian's python3-yaml and python3-numpy.
  usage: /usr/bin/python3 scripts/general_metadata_oracle.py LLAMA_CPP_SOURCE_DIR"""
import json, os, shutil, sys, tempfile
from pathlib import Path
sys.path.insert(0, os.path.join(sys.argv[1], "gguf-py"))
import gguf
from gguf.metadata import Metadata

here = Path(__file__).resolve().parent.parent / "tests" / "data" / "model_cards"
cases = json.loads((here / "cases.json").read_text())
out = {"ids": [], "cards": {}, "metadata": []}

for model_id, total in cases["ids"]:
    out["ids"].append([model_id, total, list(Metadata.get_model_id_components(model_id, total))])

def norm(x):
    if isinstance(x, dict): return {str(k): norm(v) for k, v in x.items()}
    if isinstance(x, list): return [norm(v) for v in x]
    return x

for card in sorted(p.name for p in here.glob("*.md")):
    d = Path(tempfile.mkdtemp())
    shutil.copy(here / card, d / "README.md")
    try:
        out["cards"][card] = norm(Metadata.load_model_card(d))
    except Exception as e:
        out["cards"][card] = "error: " + type(e).__name__
    shutil.rmtree(d)

for c in cases["metadata"]:
    root = Path(tempfile.mkdtemp())
    d = root / c["folder"]
    d.mkdir()
    if c.get("card"): shutil.copy(here / c["card"], d / "README.md")
    if c.get("config") is not None: (d / "config.json").write_text(json.dumps(c["config"]))
    if c.get("generation") is not None: (d / "generation_config.json").write_text(json.dumps(c["generation"]))
    total = c["total"]
    override = None
    if c.get("override") is not None:  # the converter's --metadata file
        override = root / "override.json"
        override.write_text(json.dumps(c["override"]))
    m = Metadata.load(override, d, c.get("model_name"), total)
    if m.name is None: m.name = d.name                       # prepare_metadata's fallbacks
    if m.size_label is None and total > 0: m.size_label = c["size"]
    w = gguf.GGUFWriter(None, "llama")
    m.set_gguf_meta_model(w)
    keys = []
    for k, v in w.kv_data[0].items():
        if k == "general.architecture": continue  # (the writer's own, not the metadata's)
        try:
            keys.append([k, w._pack_val(v.value, v.type, add_vtype=True, sub_type=v.sub_type).hex()])
        except Exception:
            keys.append([k, "error"])
    out["metadata"].append({"name": c["name"], "keys": keys})
    shutil.rmtree(root)

(here / "expected.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
print("wrote", here / "expected.json")
