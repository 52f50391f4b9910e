"""pyarrow, the reference for rlcore's parquet reading and writing (tests/core/data/parquet_test.cc).

  write DIR   writes parquet files that exercise the reader (row groups, nulls,
              nested lists and structs, maps, dictionary encoding, every integer
              width) and prints {file: rows as pyarrow reads them} as JSON
  read FILE   prints {"schema": [...], "num_row_groups": N, "rows": [...]} for a file rlcore wrote
"""
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def plain(value, type):
    """pyarrow's Python value of `type` in rlcore's JSON shape: maps (lists of pairs) become objects."""
    if value is None:
        return None
    if pa.types.is_map(type):
        return {key: plain(item, type.item_type) for key, item in value}
    if pa.types.is_struct(type):
        return {field.name: plain(value[field.name], field.type) for field in type}
    if pa.types.is_list(type) or pa.types.is_large_list(type) or pa.types.is_fixed_size_list(type):
        return [plain(item, type.value_type) for item in value]
    if pa.types.is_dictionary(type):
        return plain(value, type.value_type)
    return value


def rows_of(table):
    return [{field.name: plain(row[field.name], field.type) for field in table.schema} for row in table.to_pylist()]


def verl_rows():
    """verl's GSM8K layout with nulls in every nesting level, across three row groups."""
    prompt = pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))
    schema = pa.schema([
        ("data_source", pa.string()),
        ("prompt", prompt),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("ground_truth", pa.string()), ("style", pa.string())])),
        ("extra_info", pa.struct([("answer", pa.string()), ("index", pa.int64()), ("question", pa.string()),
                                  ("split", pa.string())])),
    ])
    rows = []
    for i in range(7):
        rows.append({
            "data_source": "openai/gsm8k" if i != 3 else None,
            "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"What is {i}+{i}? ü ✓"}]
            if i != 5 else [{"role": "user", "content": "Only a user turn."}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(2 * i)} if i != 4 else None,
            "extra_info": {"split": "train", "index": i, "answer": f"#### {2 * i}",
                           "question": None if i == 2 else f"What is {i}+{i}?"},
        })
    return pa.Table.from_pylist(rows, schema=schema), 3


def types():
    """Every type rlcore reads, each with nulls."""
    n = 5
    columns = {
        "i8": pa.array([1, -2, None, 127, -128], pa.int8()),
        "i16": pa.array([300, None, -300, 0, 32767], pa.int16()),
        "i32": pa.array([None, 70000, -70000, 1, 2], pa.int32()),
        "i64": pa.array([2**40, -(2**40), 0, None, 9007199254740993], pa.int64()),
        "u8": pa.array([0, 255, None, 1, 2], pa.uint8()),
        "u16": pa.array([65535, None, 0, 1, 2], pa.uint16()),
        "u32": pa.array([4294967295, 0, None, 1, 2], pa.uint32()),
        "u64": pa.array([18446744073709551615, 0, 1, None, 2], pa.uint64()),
        "f32": pa.array([0.5, -1.25, None, 3.0, 1e-3], pa.float32()),
        "f64": pa.array([0.1, None, -2.5e300, 1.0, 2.0], pa.float64()),
        "flag": pa.array([True, False, None, True, False], pa.bool_()),
        "text": pa.array(["plain", "", None, "日本語 🚀", "tab\tnew\nline \"quoted\""], pa.string()),
        "large_text": pa.array(["a", None, "b" * 300, "c", ""], pa.large_string()),
        "dictionary": pa.array(["x", "y", "x", None, "z"]).dictionary_encode(),
        "ints": pa.array([[1, 2, 3], [], None, [None, 4], [5]], pa.list_(pa.int64())),
        "large_texts": pa.array([["a"], None, [], ["b", None], ["c", "d"]], pa.large_list(pa.string())),
        "pair": pa.array([[1.5, 2.5], None, [0.0, -1.0], [3.0, None], [4.0, 5.0]], pa.list_(pa.float64(), 2)),
        "counts": pa.array([[("a", 1), ("b", 2)], [], None, [("c", None)], [("d", 4)]], pa.map_(pa.string(), pa.int64())),
        "nested": pa.array(
            [{"turns": [{"role": "user", "tags": ["a", "b"]}], "score": 1.0},
             {"turns": [], "score": None},
             None,
             {"turns": None, "score": 2.0},
             {"turns": [{"role": None, "tags": None}, {"role": "assistant", "tags": []}], "score": 0.0}],
            pa.struct([("turns", pa.list_(pa.struct([("role", pa.string()), ("tags", pa.list_(pa.string()))]))),
                       ("score", pa.float64())])),
        "nothing": pa.nulls(n),
    }
    return pa.table(columns), 2


def main():
    command, target = sys.argv[1], sys.argv[2]
    if command == "write":
        expected = {}
        for name, (table, row_group_size) in {"verl_rows.parquet": verl_rows(), "types.parquet": types()}.items():
            path = os.path.join(target, name)
            pq.write_table(table, path, row_group_size=row_group_size)
            assert pq.ParquetFile(path).num_row_groups > 1
            expected[name] = rows_of(pq.read_table(path))
        # Columns rlcore cannot read, for its errors.
        pq.write_table(pa.table({"ok": ["a"], "extra_info": pa.array([{"image": b"\x89PNG"}],
                                                                     pa.struct([("image", pa.binary())]))}),
                       os.path.join(target, "binary.parquet"))
        pq.write_table(pa.table({"created": pa.array([0], pa.timestamp("s"))}), os.path.join(target, "timestamp.parquet"))
        print(json.dumps(expected))
    elif command == "read":
        file = pq.ParquetFile(target)
        table = file.read()
        print(json.dumps({
            "schema": [f"{field.name}: {field.type}" for field in table.schema],
            "num_row_groups": file.num_row_groups,
            "rows": rows_of(table),
        }))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
