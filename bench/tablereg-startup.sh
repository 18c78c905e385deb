#!/bin/bash
# usage: startup.sh BIN N -> per run: tables in the edge's lobby 5 s after edge and game start together (100 configured)
BIN=$1
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
for i in $(seq 1 $2); do
RP=$(free); P1=$(free); P2=$(free); T1=$(free); T2=$(free)
redis-server --port $RP --save '' --appendonly no > /dev/null 2>&1 &
RPID=$!
sleep 0.3
$BIN serve --config "$(dirname "$0")/tablereg.toml" --broker redis://127.0.0.1:$RP --role edge --listen 127.0.0.1:$P1 --tcp-listen 127.0.0.1:$T1 > /dev/null 2>&1 &
N1=$!
$BIN serve --config "$(dirname "$0")/tablereg.toml" --broker redis://127.0.0.1:$RP --role game --listen 127.0.0.1:$P2 --tcp-listen 127.0.0.1:$T2 > /dev/null 2>&1 &
N2=$!
sleep 5
for P in $P1 $P2; do echo -n "$(curl -s http://127.0.0.1:$P/api/tables | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tables"]))')/"; done; echo -n " "
kill $N1 $N2; wait $N1 $N2 2>/dev/null; kill $RPID; wait $RPID 2>/dev/null
done; echo
