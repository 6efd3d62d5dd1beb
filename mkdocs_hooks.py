"""mkdocs hook: the documentation pages link to a few files of the repository outside ``docs/``
(the benchmark figures) with paths that also work when the Markdown is read on its own
(``../benchmarks/figures/...``); this adds those files to the site so the links resolve there too."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, InclusionLevel

SHARED = ("benchmarks/figures/*.png",)


def on_files(files, config):
    docs = Path(config["docs_dir"])
    root = docs.parent
    for pattern in SHARED:
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root).as_posix()
            files.append(File(f"../{rel}", src_dir=str(docs), dest_dir=config["site_dir"],
                              use_directory_urls=config["use_directory_urls"], dest_uri=f"assets/{rel}", inclusion=InclusionLevel.INCLUDED))
    return files
