# shellcheck shell=bash
# Files rendered from templates, for the scripts under hack/ (hack/local-cloud/templates/). Plain bash, so
# that nothing beyond bash is needed (envsubst is in gettext-base, which not every machine has). Source
# hack/lib/log.sh first (errors die).

# Print FILE with every ${name} in it replaced by the value given as name=value; nothing else is expanded
# (no other $, no command substitution) and every byte else, trailing newlines too, is kept. A ${name}
# without a value, a value no ${name} asks for, or a ${ that is not a ${name} is an error.
#   render_template hack/local-cloud/templates/etc/mysql/my.cnf state="$state" user="$(id -un)" >my.cnf
render_template() { # file name=value...
  local file=$1 pair text="" out="" rest key
  local -A values=() used=()
  shift
  for pair in "$@"; do
    [[ $pair == *=* ]] || die "render_template $file: not name=value: $pair"
    values[${pair%%=*}]=${pair#*=}
  done
  [ -r "$file" ] || die "no template $file"
  IFS= read -r -d '' text <"$file" || true # all of it: read stops at the end of the file, returning 1
  while [[ $text == *"\${"* ]]; do
    out+=${text%%"\${"*}
    rest=${text#*"\${"}
    key=${rest%%\}*}
    [[ $rest == *\}* && $key =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "$file: \${ not followed by name}"
    [[ -v values[$key] ]] || die "$file: no value given for \${$key}"
    out+=${values[$key]}
    used[$key]=1
    text=${rest#*\}}
  done
  for key in "${!values[@]}"; do
    [[ -v used[$key] ]] || die "$file has no \${$key}"
  done
  printf '%s' "$out$text"
}
