"""Python's own str methods, the reference for python_unicode.cc's tables
(tests/plugins/reward/python_unicode_test.cc). Usage:
  python_str_methods.py lower IN OUT     writes IN's text (UTF-8) lowered by str.lower() to OUT
  python_str_methods.py isalnum OUT      writes the [first, last] ranges where str.isalnum() holds, as JSON
"""
import json
import sys


def main():
    if sys.argv[1] == "lower":
        with open(sys.argv[2], encoding="utf-8", newline="") as f:
            text = f.read()
        with open(sys.argv[3], "w", encoding="utf-8", newline="") as f:
            f.write(text.lower())
    elif sys.argv[1] == "isalnum":
        ranges, start = [], None
        for c in range(0x110001):
            inside = c < 0x110000 and chr(c).isalnum()
            if inside and start is None:
                start = c
            if not inside and start is not None:
                ranges.append([start, c - 1])
                start = None
        with open(sys.argv[2], "w") as f:
            json.dump(ranges, f)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
