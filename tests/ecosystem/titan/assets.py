"""Local stand-ins for TorchTitan's test assets: a byte-level BPE tokenizer (vocabulary under the debug model's 2048)
and a JSON-lines text corpus that `datasets.load_dataset(dir, split="train")` reads as the `c4_test` dataset.

TorchTitan's own `tests/assets/` (C4 excerpts and a test tokenizer) are not in its wheel; these are generated here from
a seeded word list instead, so the fixture carries no third-party data. The layout is the one TorchTitan's debug config
expects relative to the working directory: `tests/assets/tokenizer/` and `tests/assets/c4_test/`.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

_WORDS = (
    "the of and to in is was for on that with as by at from his her an were are which this be or had not first one "
    "their its new after but who they have has been two also other all she more time than into year most only over "
    "city school state world during when between would some such used many then while where these later known them "
    "river mountain garden window kettle lantern harbour meadow engine signal forest market bridge letter summer "
    "winter island village station morning evening number colour paper stone silver copper water field train road"
).split()
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


def _documents(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(count):
        sentences = []
        for _ in range(rng.randint(3, 12)):
            words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 18))]
            sentences.append(" ".join(words).capitalize() + rng.choice(".!?."))
        docs.append(" ".join(sentences))
    return docs


def train_tokenizer(docs: list[str], vocab_size: int) -> Any:
    """A byte-level BPE `tokenizers.Tokenizer` trained on `docs`, with BOS and EOS as its first two tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[BOS, EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(docs, trainer=trainer)
    return tokenizer


def write(root: Path, documents: int = 2000, seed: int = 0) -> Path:
    """Writes `tests/assets/{tokenizer,c4_test}` under `root` (idempotent) and returns `root`."""
    assets = root / "tests" / "assets"
    tok_dir, data_dir = assets / "tokenizer", assets / "c4_test"
    tok_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    docs = _documents(documents, seed)
    with open(data_dir / "data.json", "w") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}) + "\n")

    tokenizer = train_tokenizer(docs, vocab_size=2000)
    tokenizer.save(str(tok_dir / "tokenizer.json"))
    config = {"bos_token": BOS, "eos_token": EOS, "model_max_length": 131072}
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (tok_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    return root


if __name__ == "__main__":
    print(write(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
