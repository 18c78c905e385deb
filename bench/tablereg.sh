#!/bin/bash
# usage: bench/tablereg.sh BIN  (OPS=1 also: POST 100 tables on the edge, then 50 DELETEs)
# Redis command counts of a 2-node cluster (edge + game, 100 configured tables): 20 s idle
BIN=$1
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
RP=$(free); P1=$(free); P2=$(free); T1=$(free); T2=$(free)
redis-server --port $RP --save '' --appendonly no --daemonize no > /tmp/tablereg-redis.log 2>&1 &
RPID=$!
sleep 0.5
$BIN serve --config "$(dirname "$0")/tablereg.toml" --broker redis://127.0.0.1:$RP --role edge --listen 127.0.0.1:$P1 --tcp-listen 127.0.0.1:$T1 > /tmp/tablereg-n1.log 2>&1 &
N1=$!
$BIN serve --config "$(dirname "$0")/tablereg.toml" --broker redis://127.0.0.1:$RP --role game --listen 127.0.0.1:$P2 --tcp-listen 127.0.0.1:$T2 > /tmp/tablereg-n2.log 2>&1 &
N2=$!
sleep 6
redis-cli -p $RP config resetstat > /dev/null
sleep 20
echo "== idle 20 s (uptime: $(uptime | sed 's/.*load/load/'))"
redis-cli -p $RP info commandstats | grep -v "^#" | sed 's/usec_per_call.*//' | tr -d '\r'
if [ -n "$OPS" ]; then
  redis-cli -p $RP config resetstat > /dev/null
  curl -s -o /dev/null -w "POST %{http_code}\n" -X POST -d '{"game":"holdem","seats":6,"count":100}' http://127.0.0.1:$P1/api/tables
  sleep 3
  echo "== POST of 100 tables on the edge, then 3 s (claims by the game node)"
  redis-cli -p $RP info commandstats | grep -v "^#" | sed 's/usec_per_call.*//' | tr -d '\r'
  curl -s http://127.0.0.1:$P2/api/tables | python3 -c 'import json,sys; v=json.load(sys.stdin); print("owned by the game node:", sum(1 for t in v["tables"] if "owner" in t))'
  for P in $P1 $P2; do curl -s http://127.0.0.1:$P/api/tables | python3 -c 'import json,sys; v=json.load(sys.stdin); print("lobby before deletes:", len(v["tables"]))'; done
  redis-cli -p $RP hlen herald:lobby:entries
  redis-cli -p $RP config resetstat > /dev/null
  for i in $(seq 101 150); do curl -s -o /dev/null -w "%{http_code} " -X DELETE http://127.0.0.1:$P1/api/tables/$i; done; echo
  echo "== 50 DELETEs on the edge (owner: the game node)"
  redis-cli -p $RP info commandstats | grep -v "^#" | sed 's/usec_per_call.*//' | tr -d '\r'
  sleep 4
  for P in $P1 $P2; do curl -s http://127.0.0.1:$P/api/tables | python3 -c 'import json,sys; v=json.load(sys.stdin); ids=sorted(t["table"] for t in v["tables"]); print("lobby after deletes + 4 s:", len(ids), [i for i in range(1,201) if i not in ids and not 101<=i<=150])'; done
fi
kill $N1 $N2; wait $N1 $N2 2>/dev/null
kill $RPID; wait $RPID 2>/dev/null
