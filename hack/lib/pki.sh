# shellcheck shell=bash disable=SC2154  # state: set by hack/local-cluster.sh, which sources this
# The test bed's certificates and kubeconfigs, under $state/pki and $state: a CA, the API server's serving
# certificate, a client certificate per identity (admin, a plain user, the controller manager, the
# scheduler, the API server towards kubelets), the service-account signing key. Sourced by
# hack/local-cluster.sh; source hack/lib/log.sh first (errors die).

sign() { # name subject extfile (run inside the pki dir)
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 \
    -extfile "$3" 2>/dev/null
  rm -f "$1.csr"
}

# A CA, the apiserver's serving cert, client certs for each identity, and the service-account key.
make_pki() {
  local pki=$state/pki
  [ -f "$pki/sa.pub" ] && return 0
  command -v openssl >/dev/null || die "openssl is required"
  mkdir -p "$pki" && chmod 700 "$pki"
  (
    cd "$pki" || exit 1
    # The extensions a strict X.509 check wants (Python >= 3.13 verifies strictly by default): a CA with a
    # critical keyUsage, certificates that name the key that signed them.
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=hybrid-operator-local-ca" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" -addext "subjectKeyIdentifier=hash" 2>/dev/null
    leaf="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid:always"
    {
      echo "$leaf"
      echo "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
      echo "extendedKeyUsage=serverAuth"
    } >server.ext
    printf '%s\nextendedKeyUsage=clientAuth\n' "$leaf" >client.ext
    sign server "/CN=kube-apiserver" server.ext
    sign admin "/O=system:masters/CN=kubernetes-admin" client.ext
    sign user "/CN=plain-user" client.ext
    sign kube-controller-manager "/CN=system:kube-controller-manager" client.ext
    sign kube-scheduler "/CN=system:kube-scheduler" client.ext
    # The API server's identity towards kubelets (logs, exec, port-forward, nodes/proxy) of a real node.
    sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" client.ext
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || die "could not create certificates in $pki"
}

# What a bed made before real nodes lacks: the kubelet client certificate, IP:10.96.0.1 on the serving one.
pki_current() {
  (
    cd "$state/pki" || exit 1
    [ -f apiserver-kubelet-client.crt ] || sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" client.ext
    grep -q IP:10.96.0.1 server.ext || { sed -i 's/IP:127.0.0.1,/IP:127.0.0.1,IP:10.96.0.1,/' server.ext && sign server "/CN=kube-apiserver" server.ext; }
  ) || die "could not bring the certificates in $state/pki up to date"
}

kubeconfig_for() { # identity port -> writes $state/<identity>.kubeconfig
  local who=$1 port=$2 pki=$state/pki
  {
    echo "apiVersion: v1"
    echo "kind: Config"
    echo "clusters:"
    echo "- name: local"
    echo "  cluster: {server: 'https://127.0.0.1:$port', certificate-authority: '$pki/ca.crt'}"
    echo "users:"
    echo "- name: $who"
    echo "  user: {client-certificate: '$pki/$who.crt', client-key: '$pki/$who.key'}"
    echo "contexts:"
    echo "- name: $who@local"
    echo "  context: {cluster: local, user: $who, namespace: default}"
    echo "current-context: $who@local"
  } >"$state/$who.kubeconfig"
  chmod 600 "$state/$who.kubeconfig"
}
