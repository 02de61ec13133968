# shellcheck shell=bash disable=SC2154  # cache, name: set by hack/local-cluster.sh, which sources this
# Images for the test bed's real node, with no registry outside this machine (hack/lib/realnode.sh):
#
# - pause (the sandbox, from Kubernetes' own build/pause/linux/pause.c), busybox and a fake nginx (busybox
#   httpd serving one page on port 80), built from this machine's gcc and Debian's static busybox as OCI
#   archives by Podman on storage of its own, cached under $cache/bin/ keyed by their versions;
# - imported into the node's containerd (namespace k8s.io) at `up`; busybox and the fake nginx also pushed
#   to the bed's registry (Debian's docker-registry) as library/busybox:latest and library/nginx:latest,
#   which containerd asks for everything of docker.io (hack/realnode/hosts.toml), so `image: nginx:latest`
#   with imagePullPolicy Always pulls the fake nginx;
# - `hack/local-cluster.sh load ARCHIVE [NAME]` imports any OCI or Docker archive and names it NAME.

node_sandbox_image=localhost/pause:$KUBERNETES_VERSION

node_images_dir() {
  local busybox
  busybox=$(dpkg-query -W -f '${Version}' busybox-static 2>/dev/null || echo local)
  # r2: the fake nginx stops on SIGTERM (r1's httpd was PID 1 without a handler: every pod took its grace period)
  echo "$cache/bin/node-images-r2-$KUBERNETES_VERSION-busybox-${busybox//[^A-Za-z0-9.]/_}"
}

# A root filesystem with busybox and its applets, the users a container may name, and one web page.
busybox_rootfs() { # dir
  local a
  mkdir -p "$1/bin" "$1/etc" "$1/tmp" "$1/proc" "$1/sys" "$1/dev" "$1/var/www"
  chmod 1777 "$1/tmp"
  cp /bin/busybox "$1/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$1/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$1/etc/group"
  echo '<h1>fake nginx</h1>' >"$1/var/www/index.html"
}

realnode_images() {
  local dir
  dir=$(node_images_dir)
  [ -s "$dir/fake-nginx.oci.tar" ] && return 0
  local start=$SECONDS tmp src
  log "building the node's images (pause, busybox, fake nginx) with podman; first time only"
  # Fixed paths, made afresh: one build at a time (the real-node lock is held), and a failed one's files go.
  tmp=$cache/build/node-images
  rm -rf "$tmp" && mkdir -p "$tmp"
  src=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  mkdir -p "$tmp/pause" "$tmp/out"
  gcc -Os -Wall -Werror -static -DVERSION="$KUBERNETES_VERSION-local" -o "$tmp/pause/pause" \
    "$src/build/pause/linux/pause.c" || die "could not compile pause.c"
  strip "$tmp/pause/pause"
  busybox_rootfs "$tmp/busybox"
  # vfs: no mounts, so the storage is just files to remove afterwards. Podman wants a short runroot.
  local run=/run/hybrid-operator-node-images
  rm -rf "$run"
  local podman=(podman --root "$tmp/storage" --runroot "$run" --tmpdir "$run/tmp" --storage-driver vfs
    --cgroup-manager cgroupfs --runtime runc --events-backend file)
  node_image_import "$tmp/pause" "$node_sandbox_image" "${podman[@]}" --change 'ENTRYPOINT ["/pause"]' \
    --change 'USER 65535:65535'
  node_image_import "$tmp/busybox" localhost/busybox:latest "${podman[@]}" --change 'CMD ["sh"]'
  # shellcheck disable=SC2016  # $pid and $! are the container shell's
  node_image_import "$tmp/busybox" localhost/fake-nginx:latest "${podman[@]}" \
    --change 'CMD ["sh", "-c", "trap \"kill $pid; exit 0\" TERM INT; httpd -f -v -p 80 -h /var/www & pid=$!; wait $pid"]' \
    --change 'EXPOSE 80/tcp'
  "${podman[@]}" save -q --format oci-archive -o "$tmp/out/pause.oci.tar" "$node_sandbox_image" >&2
  "${podman[@]}" save -q --format oci-archive -o "$tmp/out/busybox.oci.tar" localhost/busybox:latest >&2
  "${podman[@]}" save -q --format oci-archive -o "$tmp/out/fake-nginx.oci.tar" localhost/fake-nginx:latest >&2
  rm -rf "$dir" && mv "$tmp/out" "$dir"
  rm -rf "$tmp" "$run"
  log "  images built in $((SECONDS - start))s ($dir)"
}

node_image_import() { # rootfs name podman... --change...
  local rootfs=$1 image=$2
  shift 2
  local podman=() changes=()
  while [ "$#" -gt 0 ] && [ "$1" != --change ]; do podman+=("$1") && shift; done
  changes=("$@")
  tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -c . |
    "${podman[@]}" import -q "${changes[@]}" - "$image" >/dev/null || die "podman import $image failed"
}

# The three images into containerd, each once.
realnode_import_images() {
  local dir i have
  dir=$(node_images_dir)
  have=$(ctr_node images list -q)
  for i in pause:"$node_sandbox_image" busybox:localhost/busybox:latest fake-nginx:localhost/fake-nginx:latest; do
    grep -qxF "${i#*:}" <<<"$have" || ctr_node images import "$dir/${i%%:*}.oci.tar" >/dev/null
  done
}

realnode_push_images() {
  local dir reg
  dir=$(node_images_dir)
  reg=127.0.0.1:$(port_of registry)
  skopeo copy -q --insecure-policy --dest-tls-verify=false "oci-archive:$dir/fake-nginx.oci.tar" \
    "docker://$reg/library/nginx:latest" >&2 || die "could not push the fake nginx to the registry on $reg"
  skopeo copy -q --insecure-policy --dest-tls-verify=false "oci-archive:$dir/busybox.oci.tar" \
    "docker://$reg/library/busybox:latest" >&2 || die "could not push busybox to the registry on $reg"
}

# An image name as the kubelet asks containerd for it: hybrid-operator:latest -> docker.io/library/...
normalize_image() { # name
  local n=$1 first=${1%%/*}
  if [[ $n != */* ]]; then
    n=docker.io/library/$n
  elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
    n=docker.io/$n
  fi
  [[ ${n##*/} == *[:@]* ]] || n=$n:latest
  echo "$n"
}

# Import an image archive (OCI or Docker) into the node's containerd and name it; prints the name.
cmd_load() { # archive [name]
  local archive=${1:-} want=${2:-} out got
  [ -n "$archive" ] || die "usage: $0 load ARCHIVE [NAME]"
  [ -r "$archive" ] || die "no image archive $archive"
  if ! is_real_node || ! running containerd; then
    die "test bed '$name' has no real node running: LOCAL_CLUSTER_NAME=$name $0 up --real-node first"
  fi
  local start=$SECONDS
  out=$(ctr_node images import "$archive") || die "ctr images import $archive failed"
  got=$(sed -n 's/^unpacking \(.*\) (sha256:.*/\1/p' <<<"$out" | head -n 1)
  [ -n "$got" ] || die "$archive names no image (ctr images import printed: $out)"
  if [ -n "$want" ]; then
    want=$(normalize_image "$want")
    [ "$got" = "$want" ] || ctr_node images tag --force "$got" "$want" >/dev/null || die "could not name $got $want"
    got=$want
  fi
  log "loaded $archive as $got in $((SECONDS - start))s"
  echo "$got"
}
