#!/usr/bin/env python3
"""Hugging Face `tokenizers` as the authority for rlcore's tokenizer (tests/sdk/tokenizer_hf_test.cc).

  tokenizer_reference.py FIXTURE_DIR TEXTS.json SEED COUNT OUT_DIR [VARIANT]

FIXTURE_DIR holds tokenizer.json.gz and tokenizer_config.json (a real model's,
tests/fixtures/tokenizers/<name>/). Writes OUT_DIR/tokenizer.json (the file,
decompressed, for rlcore to load; with VARIANT, first rewritten by
VARIANTS[VARIANT] to use other components), a copy of tokenizer_config.json,
and OUT_DIR/reference.json: what tokenizers.Tokenizer.from_file gives, as an
object of parallel lists:

  texts        TEXTS.json's strings, then COUNT random strings from SEED
  ids          encode(text, add_special_tokens=False).ids
  ids_special  encode(text, add_special_tokens=True).ids
  ids_as_text  encode(text, add_special_tokens=False).ids with
               encode_special_tokens=True (special tokens in the text are plain text)
  decoded      decode(ids_special, skip_special_tokens=False)
  decoded_skip decode(ids_special, skip_special_tokens=True)
  random_ids   COUNT // 10 random id lists (any token of the vocabulary, byte
               tokens, special tokens), and their decode()s:
  random_decoded, random_decoded_skip

The random strings mix scripts, emoji sequences, whitespace runs (tabs,
newlines, Unicode spaces), control characters, characters next to the
surrogate range, combining marks, digit runs and special-token look-alikes,
so every normalizer, pre-tokenizer, BPE and decoder path gets exercised.
"""
import gzip
import json
import os
import random
import shutil
import sys

import tokenizers

if tokenizers.__version__.split(".")[:2] != ["0", "23"]:
    sys.exit(f"tokenizer_reference.py: expected tokenizers 0.23.x (scripts/python-requirements.txt), "
             f"got {tokenizers.__version__}")


def chars(*ranges):
    out = []
    for first, last in ranges:
        out.extend(chr(c) for c in range(first, last + 1))
    return out


LETTERS = chars((0x41, 0x5A), (0x61, 0x7A))
WORDS = ["the", "The", " quick", "brown", "fox", "don't", "I'm", "they'll", "WE'VE", "it's", "naïve",
         "café", "résumé", "Ωmega", "straße", "hello", "world", "Question", "Answer", "####", "print",
         "def", "return", "self", "http", "://", "www", ".com", "CamelCase", "snake_case", "x86_64"]
DIGITS = chars((0x30, 0x39))
OTHER_DIGITS = chars((0x660, 0x669), (0x966, 0x96F), (0xFF10, 0xFF19), (0x1D7CE, 0x1D7D7))
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["…", "—", "«", "»", "“", "”", "，", "。", "！", "？", "、"]
SPACES = [" ", " ", " ", "\t", "\n", "\n", "\r", "\r\n", "\x0b", "\x0c", "\u00a0", "\u1680", "\u2000",
          "\u2003", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u0085",
          "\u200b", "\ufeff"]
CONTROLS = chars((0x00, 0x08), (0x0E, 0x1F), (0x7F, 0x9F)) + ["\u200d", "\u200c", "\u2060", "\u00ad"]
NEAR_SURROGATES = chars((0xD7F0, 0xD7FF), (0xE000, 0xE00F)) + ["\ufffd", "\ufffe", "\uffff", "\U0010ffff",
                                                               "\U000e0001", "\U000e0041", "\U000f0000"]
COMBINING = chars((0x300, 0x36F), (0x483, 0x489), (0x591, 0x5BD), (0x64B, 0x65F), (0x900, 0x903),
                  (0x93A, 0x94F), (0xE31, 0xE31), (0xE34, 0xE3A), (0x1AB0, 0x1ABE), (0x20D0, 0x20F0),
                  (0xFE20, 0xFE2F))
SCRIPTS = [
    chars((0x4E00, 0x4FFF), (0x7500, 0x76FF)),          # CJK ideographs
    chars((0x3041, 0x3096), (0x30A1, 0x30FA)),          # hiragana, katakana
    chars((0xAC00, 0xAD00), (0x1100, 0x1112), (0x1161, 0x1175), (0x11A8, 0x11C2)),  # Hangul, jamo
    chars((0x410, 0x44F), (0x401, 0x401)),              # Cyrillic
    chars((0x391, 0x3A9), (0x3B1, 0x3C9)),              # Greek
    chars((0x621, 0x64A)),                              # Arabic
    chars((0x5D0, 0x5EA)),                              # Hebrew
    chars((0x905, 0x939)),                              # Devanagari
    chars((0xE01, 0xE2E)),                              # Thai
    chars((0xC0, 0xFF), (0x100, 0x17F)),                # Latin-1, Latin Extended-A
    chars((0x1E00, 0x1EFF)),                            # Latin Extended Additional (precomposed)
    chars((0x10000, 0x1004D), (0x1D400, 0x1D44F), (0x20000, 0x2004F)),  # astral letters
    chars((0xE000, 0xE0FF), (0xF0000, 0xF00FF)),        # private use
    chars((0x2580, 0x259F)),                            # block elements, U+2581 (SentencePiece's space)
]
EMOJI = chars((0x1F600, 0x1F64F), (0x1F300, 0x1F3FF), (0x1F900, 0x1F9FF), (0x2600, 0x26FF)) + [
    "👩\u200d👩\u200d👧\u200d👦", "👍🏽", "🏳\ufe0f\u200d🌈", "🇯🇵", "🇺🇸", "1\ufe0f\u20e3", "❤\ufe0f", "🤖🚀"]
SPECIAL_LOOKALIKES = ["<s>", "</s>", "<unk>", "<pad>", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
                      "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<think>", "</think>",
                      "<|im_start", "<|end", "<0x41>", "<0x0A>", "<0xZZ>", "\u2581", "\u2581\u2581", "Ġ", "Ċ",
                      "<s >", " <s>", "</s> ", "<<s>>"]


SPACE = "\u2581"  # SentencePiece's meta symbol


def metaspace(prepend_scheme, split):
    return {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": prepend_scheme, "split": split}


def split(pattern, behavior, invert=False, kind="Regex"):
    return {"type": "Split", "pattern": {kind: pattern}, "behavior": behavior, "invert": invert}


def replace(pattern, content, kind="String"):
    return {"type": "Replace", "pattern": {kind: pattern}, "content": content}


def sp_decoder(strip=True):
    steps = [replace(SPACE, " "), {"type": "ByteFallback"}, {"type": "Fuse"}]
    if strip:
        steps.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {"type": "Sequence", "decoders": steps}


def add_token(tok, content, special, normalized, lstrip=False, rstrip=False):
    ids = [t["id"] for t in tok["added_tokens"]] + list(tok["model"]["vocab"].values())
    tok["added_tokens"].append({"id": max(ids) + 1, "content": content, "single_word": False, "lstrip": lstrip,
                                "rstrip": rstrip, "normalized": normalized, "special": special})


def metaspace_first(tok):
    """Mistral v0.3 and newer Llama conversions: no normalizer, Metaspace "first"
    without splitting, and the Metaspace decoder."""
    tok["normalizer"] = None
    tok["pre_tokenizer"] = metaspace("first", False)
    tok["decoder"] = metaspace("first", False)
    add_token(tok, "[INST]", True, False)
    add_token(tok, "hello", False, True)


def metaspace_first_after_normalizer(tok):
    """Metaspace "first" behind a Split and a Replace normalizer whose
    multi-character matches move where a piece starts in the input."""
    tok["normalizer"] = {"type": "Sequence", "normalizers": [replace("\t+", "\u2192", "Regex"), replace("  ", "_")]}
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split("\\p{N}+", "Isolated"),
                                                                 metaspace("first", True)]}
    tok["decoder"] = {"type": "Sequence", "decoders": [metaspace("first", True), {"type": "ByteFallback"},
                                                       {"type": "Fuse"}]}
    add_token(tok, "hello", False, True)
    add_token(tok, "[SEP]", True, False, lstrip=True, rstrip=True)


def metaspace_always(tok):
    """Metaspace "always", splitting; the legacy decoder sequence with Strip."""
    tok["normalizer"] = None
    tok["pre_tokenizer"] = metaspace("always", True)
    tok["decoder"] = sp_decoder()


def metaspace_never(tok):
    """Metaspace "never" (add_prefix_space false), NFC before it."""
    tok["normalizer"] = {"type": "NFC"}
    tok["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE, "add_prefix_space": False,
                            "prepend_scheme": "never", "split": True}
    # HF's Strip panics where its cuts cross or a token is shorter than "stop":
    # stop only runs on vocabulary tokens here, which are never empty.
    tok["decoder"] = {"type": "Sequence", "decoders": [{"type": "Strip", "content": SPACE, "start": 0, "stop": 1},
                                                       {"type": "ByteFallback"}, metaspace("never", True),
                                                       {"type": "Fuse"},
                                                       {"type": "Strip", "content": " ", "start": 2, "stop": 0}]}


def gemma_style(tok):
    """Gemma: Replace alone (no prefix), a Split that merges with the previous piece."""
    tok["normalizer"] = replace(" ", SPACE)
    tok["pre_tokenizer"] = split(SPACE, "MergedWithPrevious", kind="String")
    tok["decoder"] = sp_decoder(strip=False)
    tok["post_processor"] = None


def unk_tokens(tok):
    """No byte fallback: what the vocabulary lacks becomes <unk>, one per character."""
    tok["model"]["byte_fallback"] = False
    tok["model"]["fuse_unk"] = False


def fused_unk_partial_fallback(tok):
    """byte_fallback lacking the lead bytes of 3-byte characters: those become
    <unk>, fused, and (as HF has it) emitted after the byte tokens that follow."""
    for b in range(0xE0, 0xF0):
        del tok["model"]["vocab"]["<0x%02X>" % b]
    tok["model"]["fuse_unk"] = True


def split_behaviors(tok):
    """The other Split behaviors, invert, a pattern that matches the empty string,
    and no decoder (HF joins the tokens with spaces)."""
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        split("\\s+", "Removed"), split("\\p{L}+", "Contiguous", invert=True), split("a*", "MergedWithNext"),
        split("\\d", "MergedWithPrevious", invert=True)]}
    tok["decoder"] = None


VARIANTS = {f.__name__: f for f in [metaspace_first, metaspace_first_after_normalizer, metaspace_always,
                                    metaspace_never, gemma_style, unk_tokens, fused_unk_partial_fallback,
                                    split_behaviors]}


def segment(rng):
    kind = rng.random()
    if kind < 0.14:
        return "".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 12)))
    if kind < 0.24:
        return rng.choice(WORDS)
    if kind < 0.34:
        return "".join(rng.choice(DIGITS) for _ in range(rng.randint(1, 14)))
    if kind < 0.36:
        return "".join(rng.choice(OTHER_DIGITS) for _ in range(rng.randint(1, 4)))
    if kind < 0.44:
        return "".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 4)))
    if kind < 0.56:
        return "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 6)))
    if kind < 0.60:
        return "".join(rng.choice(CONTROLS) for _ in range(rng.randint(1, 3)))
    if kind < 0.63:
        return rng.choice(NEAR_SURROGATES)
    if kind < 0.69:
        base = rng.choice(LETTERS + SCRIPTS[4] + SCRIPTS[5] + SCRIPTS[7] + [" ", "\u2581"])
        return base + "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 4)))
    if kind < 0.84:
        script = rng.choice(SCRIPTS)
        return "".join(rng.choice(script) for _ in range(rng.randint(1, 8)))
    if kind < 0.93:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
    return rng.choice(SPECIAL_LOOKALIKES)


def random_text(rng):
    if rng.random() < 0.02:
        return ""
    return "".join(segment(rng) for _ in range(rng.randint(1, 12)))


def random_ids(rng, known_ids, byte_ids, special_ids):
    out = []
    for _ in range(rng.randint(0, 24)):
        kind = rng.random()
        if kind < 0.3 and byte_ids:
            out.append(rng.choice(byte_ids))
        elif kind < 0.4 and special_ids:
            out.append(rng.choice(special_ids))
        else:
            out.append(rng.choice(known_ids))
    return out


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    fixture, texts_path, seed, count, out_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    os.makedirs(out_dir, exist_ok=True)
    tokenizer_json = os.path.join(out_dir, "tokenizer.json")
    with gzip.open(os.path.join(fixture, "tokenizer.json.gz"), "rb") as f, open(tokenizer_json, "wb") as out:
        shutil.copyfileobj(f, out)
    if len(sys.argv) == 7:
        with open(tokenizer_json, encoding="utf-8") as f:
            rewritten = json.load(f)
        VARIANTS[sys.argv[6]](rewritten)
        with open(tokenizer_json, "w", encoding="utf-8") as out:
            json.dump(rewritten, out, ensure_ascii=False)
    shutil.copyfile(os.path.join(fixture, "tokenizer_config.json"), os.path.join(out_dir, "tokenizer_config.json"))
    tok = tokenizers.Tokenizer.from_file(tokenizer_json)
    with open(texts_path, encoding="utf-8") as f:
        texts = list(json.load(f))
    rng = random.Random(seed)
    texts += [random_text(rng) for _ in range(count)]

    ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    ids_special = [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]
    tok.encode_special_tokens = True
    ids_as_text = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    tok.encode_special_tokens = False

    vocab = tok.get_vocab(with_added_tokens=True)
    byte_ids = sorted(i for t, i in vocab.items() if len(t) == 6 and t.startswith("<0x") and t.endswith(">"))
    special_ids = sorted(i for i, t in tok.get_added_tokens_decoder().items() if t.special)
    known_ids = sorted(set(vocab.values()))  # decode() skips ids without a token; rlcore refuses them
    random_id_lists = [random_ids(rng, known_ids, byte_ids, special_ids) for _ in range(max(count // 10, 1))]

    result = {
        "tokenizers_version": tokenizers.__version__,
        "texts": texts,
        "ids": ids,
        "ids_special": ids_special,
        "ids_as_text": ids_as_text,
        "decoded": tok.decode_batch(ids_special, skip_special_tokens=False),
        "decoded_skip": tok.decode_batch(ids_special, skip_special_tokens=True),
        "random_ids": random_id_lists,
        "random_decoded": tok.decode_batch(random_id_lists, skip_special_tokens=False),
        "random_decoded_skip": tok.decode_batch(random_id_lists, skip_special_tokens=True),
    }
    with open(os.path.join(out_dir, "reference.json"), "w", encoding="utf-8") as out:
        json.dump(result, out, ensure_ascii=True)


if __name__ == "__main__":
    main()
