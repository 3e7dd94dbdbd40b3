"""LAVA's own job schema check, run by the Python that has Debian's lava-common.

lava-common is a Debian package, not on PyPI: rtlab's venv runs this file with the
system's python3 (rtlab.lava.validate), so it imports nothing of rtlab. It reads a JSON list
of {"name": …, "job": {…}} on stdin and writes, for each, {"name": …, "error": null} or
{"name": …, "error": {"msg": …, "path": [...]}} on stdout.
"""

import json
import sys


def main() -> int:
    try:
        from lava_common.schemas import validate
        from voluptuous import Invalid
    except ImportError as error:
        print(json.dumps({"unavailable": f"{sys.executable}: {error}"}))
        return 3
    answers = []
    for item in json.load(sys.stdin):
        try:
            validate(item["job"], strict=True)
            answers.append({"name": item["name"], "error": None})
        except Invalid as error:
            answers.append({"name": item["name"],
                            "error": {"msg": error.msg, "path": [str(p) for p in error.path]}})
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            # the schema's own code trips over a job too malformed for its checks
            answers.append({"name": item["name"],
                            "error": {"msg": f"{type(error).__name__}: {error}", "path": []}})
    print(json.dumps(answers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
