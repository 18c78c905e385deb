#!/usr/bin/env bash
# Herald's Bayeux endpoint (issue 27) checked with CometD's own Java client
# (org.cometd.java:cometd-java-client-http-jetty, long-polling; the version
# and why in bayeux-java/pom.xml): Maven resolves the jars, javac compiles
# bayeux-java/src/BayeuxJavaClient.java, and it runs against a real herald
# on a free 127.0.0.1 port with tokens and a namespace rule. Needs Java 17+
# and Maven (installed with apt when missing and run as root); under
# CI=true a missing tool or an unresolvable jar fails the test, elsewhere
# it skips.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
: "${HERALD_BIN:?HERALD_BIN must name the herald binary}"

. "$HERE/lib.sh"
need javac openjdk-17-jdk-headless
need mvn maven
work_dir bayeux-java

timeout 300 mvn -q -B -f "$HERE/bayeux-java/pom.xml" dependency:build-classpath \
  -Dmdep.outputFile="$WORK/cp.txt" >"$WORK/mvn.log" 2>&1 || {
  tail -20 "$WORK/mvn.log" >&2
  [ "${CI:-}" = true ] && fail "Maven could not resolve CometD's Java client"
  echo "SKIP: Maven could not resolve CometD's Java client"; exit 0
}
CP="$(cat "$WORK/cp.txt")"
javac -cp "$CP" -d "$WORK/classes" "$HERE/bayeux-java/src/BayeuxJavaClient.java"

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SECRET="bayeux-java-secret-bayeux-java-secret"
cat >"$WORK/herald.toml" <<TOML
listen = "127.0.0.1:$PORT"
token_hmac_secret = "$SECRET"

[[namespaces]]
name = "locked"
publish = "none"
TOML
RUST_LOG=warn "$HERALD_BIN" serve --config "$WORK/herald.toml" >"$WORK/herald.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 200); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.05
done
TOKEN="$("$HERALD_BIN" token --user java --secret "$SECRET" --ttl 1h)"
if ! timeout 60 java -cp "$WORK/classes:$CP" BayeuxJavaClient "http://127.0.0.1:$PORT/cometd" "$TOKEN"; then
  tail -20 "$WORK/herald.log" >&2
  exit 1
fi
