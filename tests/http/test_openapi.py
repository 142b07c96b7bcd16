"""spec/openapi.yaml is the source; refimpl/http/openapi.json is its checked-in JSON form.

The server serves the JSON (so it needs no YAML parser at run time). Regenerate it with
`python tests/http/test_openapi.py` after editing the YAML.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
YAML_FILE = ROOT / "spec" / "openapi.yaml"
JSON_FILE = ROOT / "refimpl" / "http" / "openapi.json"


def rendered() -> str:
    document = yaml.safe_load(YAML_FILE.read_text("utf-8"))
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def test_json_is_the_yaml() -> None:
    assert JSON_FILE.read_text("utf-8") == rendered(), (
        "refimpl/http/openapi.json is stale: run `python tests/http/test_openapi.py`"
    )


def test_every_route_of_the_app_is_documented() -> None:
    from refimpl.http.routes import ROUTES

    document = json.loads(JSON_FILE.read_text("utf-8"))
    for route in ROUTES:
        operations = document["paths"][route.path]
        for method in route.methods:
            operation = operations[method.lower()]
            shared = document["components"]["parameters"]
            documented = {
                shared[p["$ref"].split("/")[-1]]["name"] if "$ref" in p else p["name"]
                for p in operation.get("parameters", [])
            }
            assert documented == set(route.params), (route.path, method)


if __name__ == "__main__":
    JSON_FILE.write_text(rendered(), "utf-8")
    print(f"wrote {JSON_FILE.relative_to(ROOT)}", file=sys.stderr)
