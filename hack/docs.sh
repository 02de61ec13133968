#!/usr/bin/env bash
# The docs site (sources in docs/, mkdocs.yml at the top): built with MkDocs and its Material theme into
# build/site/, warnings as errors (every link between pages and every anchor checked, mkdocs.yml's
# `validation:`), then every repository path a page or README.md names checked to exist
# (hack/docs_paths.py). hack/test.sh's lint step runs this; the last line printed is the site's index.html.
#   hack/docs.sh          # build and check; says where the site is and how to serve it
#   hack/docs.sh serve    # serve it on http://127.0.0.1:8000/ with live reload (mkdocs serve), Ctrl-C stops it
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=hack/lib/log.sh
. hack/lib/log.sh docs
bin=$(hack/bootstrap.sh | tail -n 1)
export PATH="$bin:$PATH"
export NO_MKDOCS_2_WARNING=1  # Material's banner about MkDocs 2.0 on every build; we pin mkdocs < 2

if [ "${1:-}" = serve ]; then
  shift
  exec mkdocs serve --strict "$@"
fi
started=$SECONDS
mkdocs build --strict --quiet
python hack/docs_paths.py
log "built in $((SECONDS - started)) s, links, anchors and repository paths checked"
log "open it: file://$root/build/site/index.html (a local file: search needs a server)"
log "serve it: hack/docs.sh serve, or $bin/mkdocs serve, then http://127.0.0.1:8000/"
echo "$root/build/site/index.html"
