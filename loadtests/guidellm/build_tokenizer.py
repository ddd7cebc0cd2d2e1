"""Build a tokenizer GuideLLM loads with no download, counting tokens as the sandbox does.

GuideLLM's synthetic data (``--data kind=synthetic_text,prompt_tokens=N``)
makes each prompt by encoding generated text with a Hugging Face tokenizer
and cutting it at N tokens, so it needs one (``--tokenizer``); by default it
downloads the model's, which this machine (and an air-gapped cluster) cannot.
This script, run with GuideLLM's own Python (its ``tokenizers`` and ``faker``
come with it), writes a byte-level BPE tokenizer trained on the same kind of
text GuideLLM generates (Faker's), with a vocabulary sized so that a token is
about four characters: the rule the sandbox's fake vLLM, the activator and the
scaler count tokens by. So ``prompt_tokens=256`` sends a prompt the fake
server counts as about 256 tokens. Byte-level: any text encodes and decodes
back unchanged.

    .venv-guidellm/bin/python loadtests/guidellm/build_tokenizer.py out/guidellm-tokenizer

Against a real model, point GuideLLM at the model's own tokenizer instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from faker import Faker
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

# About 4 characters a token on Faker's English text (4.09 measured); a larger
# vocabulary makes tokens longer.
VOCAB_SIZE = 2_000
# Enough text for the merges to settle (a second or two to train).
TRAINING_TEXTS = 20_000
SEED = 43


def build(out: Path) -> float:
    """Write ``tokenizer.json`` and its config to ``out``; the characters per token."""
    faker = Faker()
    faker.seed_instance(SEED)
    texts = [faker.text(max_nb_chars=400) for _ in range(TRAINING_TEXTS)]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 131072,
        "eos_token": "<|endoftext|>",
        "bos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    sample = [faker.text(max_nb_chars=400) for _ in range(500)]
    chars = sum(len(t) for t in sample)
    tokens = sum(len(tokenizer.encode(t).ids) for t in sample)
    return chars / tokens


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: build_tokenizer.py OUT_DIR", file=sys.stderr)
        return 2
    per_token = build(Path(argv[0]))
    print(f"wrote {argv[0]}: {per_token:.2f} characters per token on Faker's text")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
