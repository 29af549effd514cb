#!/usr/bin/env python3
"""Every public item of a crate has an example, or a link to one that uses it.

Reads the crate's rustdoc JSON (`cargo rustdoc -p CRATE --lib -- -Z unstable-options
--output-format json`, on stable with RUSTC_BOOTSTRAP=1, as cargo-semver-checks does) and walks the
public API from the crate root: every re-exported type, function, constant and type alias, and
every public method and associated constant of their inherent impls. Fields and enum variants are
documented by their parent's example. An item passes when
  1. its own docs hold a code block (a doctest), or
  2. it links to an item whose docs hold a code block that names it (`[example](Machine#queries)`),
  3. or, for a method or associated constant, its type's example (or one its type links to)
     names it.
Each failing item is printed with its file and line; the exit code is the number of them (capped).

Usage: doc-examples.py TARGET_DIR/doc/CRATE.json
"""
import json
import re
import sys

FENCE = re.compile(r"^\s*```[^\n]*\n(.*?)^\s*```", re.S | re.M)


def code(docs):
    """The code blocks of a doc comment, joined."""
    return "\n".join(FENCE.findall(docs or ""))


def names(text, name):
    return re.search(r"\b" + re.escape(name) + r"\b", text) is not None


def main(path):
    doc = json.load(open(path))
    index = doc["index"]

    def item(i):
        return index.get(str(i)) or index.get(i)

    checked = []  # (item, parent or None)
    seen = set()

    def visit(i, parent=None):
        it = item(i)
        if it is None or it["crate_id"] != 0 or it["id"] in seen:
            return
        seen.add(it["id"])
        kind, inner = next(iter(it["inner"].items()))
        if kind == "module":
            for child in inner["items"]:
                visit(child)
        elif kind == "use":
            if inner.get("id") is not None and it["visibility"] == "public":
                visit(inner["id"])
        elif kind in ("struct", "enum", "trait", "union"):
            if it["visibility"] != "public" and parent is None and it["id"] != doc["root"]:
                pass
            checked.append((it, None))
            for impl_id in inner.get("impls", []):
                impl = item(impl_id)
                if impl is None:
                    continue
                body = impl["inner"]["impl"]
                if body.get("trait") is not None or body.get("is_synthetic"):
                    continue
                for member in body["items"]:
                    m = item(member)
                    if m is not None and m["visibility"] == "public":
                        checked.append((m, it))
        elif kind in ("function", "constant", "type_alias", "static", "macro"):
            checked.append((it, None))

    visit(doc["root"])
    missing = []
    for it, parent in checked:
        if "```" in (it.get("docs") or ""):
            continue
        name = it["name"]
        linked = any(
            names(code((item(target) or {}).get("docs")), name)
            for target in (it.get("links") or {}).values()
        )
        if linked:
            continue
        if parent is not None and (
            names(code(parent.get("docs")), name)
            or any(
                names(code((item(target) or {}).get("docs")), name)
                for target in (parent.get("links") or {}).values()
            )
        ):
            continue
        where = it.get("span") or {}
        line = (where.get("begin") or [0])[0]
        owner = parent["name"] + "::" if parent else ""
        missing.append(f"{where.get('filename', '?')}:{line}: {owner}{name}")
    for entry in missing:
        print(f"no example: {entry}")
    print(f"{len(checked) - len(missing)} of {len(checked)} public items have an example or a link to one")
    return min(len(missing), 100)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
