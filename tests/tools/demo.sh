#!/usr/bin/env bash
# make demo: a local 3-node Shoal cluster serving the seed 002 edtech-platform
# table (shared/seeds/002_*): create the table, load its items, run all seven
# access patterns (AP3 and AP4 through the GSI1 inverted index) with the shoal
# CLI, survive the loss of a node, then stop the cluster (DEMO_KEEP=1 leaves it
# running).  The cluster is secured as an operator would run it: mutual TLS
# between its processes, TLS on the client ports (native and HTTPS), and
# credentials (cluster.sh up --tls --credentials auto): an unsigned request
# is refused, `shoal` signs with the cluster's key, and boto3 reads over
# HTTPS with verify= the cluster's CA.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
root=$PWD
export SHOAL_BIN=$root/$build/bin
dir=${DEMO_DIR:-$root/$build/demo-cluster}
shoal() { "$SHOAL_BIN/shoal" "$@"; }

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { # prints the command, runs it, prints Items compactly
	local a line='$ shoal'
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./:=,-]+$ ]]; then line+=" $a"; else line+=" '${a//\'/\'\\\'\'}'"; fi
	done
	echo "$line"
	shoal "$@" | jq -c 'if .Items then (.Items[], {Count, ScannedCount}) elif .Item then .Item else . end'
}

deploy/cluster.sh down --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
http_port=${DEMO_HTTP_PORT:-8000}
say "Starting a local cluster: 3 nodes, 4 Raft groups (group 0 = catalog), 1 router; TLS and credentials on"
echo "\$ deploy/cluster.sh up --tls --credentials auto --http-port $http_port"
deploy/cluster.sh up --dir "$dir" --tls --credentials auto --http-port "$http_port"
export SHOAL_ENDPOINT=file://$dir/router.endpoint
# The cluster's key, not whatever the caller's environment holds (shoal
# finds it next to router.endpoint; boto3 and the AWS CLI read this file).
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE
export AWS_SHARED_CREDENTIALS_FILE=$dir/aws-credentials AWS_CONFIG_FILE=/dev/null
export AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
stop() { [[ ${DEMO_KEEP:-0} == 1 ]] || deploy/cluster.sh down --dir "$dir"; }
trap stop EXIT

say "Secured: clients reach the router over TLS and must sign every request"
echo "router: $(cat "$dir/router.endpoint"), HTTPS: $(cat "$dir/http.endpoint"), CA: $dir/tls/ca.pem"
echo "keys: $dir/credentials (mode $(stat -c %a "$dir/credentials")); the client's copy: $dir/aws-credentials"
echo '$ shoal list-tables --no-sign-request'
shoal list-tables --no-sign-request || true
echo '$ shoal list-tables            # signed with the key in aws-credentials, found by shoal'
shoal list-tables | jq -c .

say "Create the edtech-platform table (PK, SK; GSI1 on GSI1PK, GSI1SK)"
echo '$ shoal create-table --cli-input-json file://deploy/demo/edtech-table.json'
shoal create-table --cli-input-json file://deploy/demo/edtech-table.json |
	jq -c '.TableDescription | {TableName, TableStatus, KeySchema}'
echo '$ shoal batch-write-item --request-items file://deploy/demo/edtech-items.json'
shoal batch-write-item --request-items file://deploy/demo/edtech-items.json | jq -c .
shoal describe-table --table-name edtech-platform | jq -c '.Table | {TableName, ItemCount, TableSizeBytes}'

kce='PK = :pk AND begins_with(SK, :prefix)'
say "AP1: profile of student s1"
show get-item --table-name edtech-platform --key '{"PK":{"S":"STUDENT#s1"},"SK":{"S":"PROFILE"}}'
say "AP2: every course student s1 is enrolled in"
show query --table-name edtech-platform --key-condition-expression "$kce" \
	--expression-attribute-values '{":pk":{"S":"STUDENT#s1"},":prefix":{"S":"ENROLLMENT#"}}'
say "AP5: structure of course c10 (modules and lessons, in sort-key order)"
show query --table-name edtech-platform --key-condition-expression "$kce" \
	--expression-attribute-values '{":pk":{"S":"COURSE#c10"},":prefix":{"S":"MODULE#"}}'
say "AP6: only the modules of course c10 (the filter runs after the read)"
show query --table-name edtech-platform --key-condition-expression "$kce" \
	--filter-expression 'attribute_not_exists(lesson_id)' \
	--expression-attribute-values '{":pk":{"S":"COURSE#c10"},":prefix":{"S":"MODULE#"}}'
say "AP7: lessons of module m1 of course c10, newest first"
show query --table-name edtech-platform --key-condition-expression "$kce" --no-scan-index-forward \
	--expression-attribute-values '{":pk":{"S":"COURSE#c10"},":prefix":{"S":"MODULE#m1#LESSON#"}}'

# GSIs are fed asynchronously (change streams): poll, with a deadline, until
# GSI1 shows what the base table holds.
gkce='GSI1PK = :pk AND begins_with(GSI1SK, :prefix)'
await_count() { # want, then the query's arguments
	local want=$1 deadline=$((SECONDS + 30))
	shift
	until [[ $(shoal "$@" | jq .Count) == "$want" ]]; do
		((SECONDS < deadline)) || { echo "GSI1 did not show $want items in 30 s" >&2; return 1; }
		sleep 0.05
	done
}
ap3=(query --table-name edtech-platform --index-name GSI1 --key-condition-expression "$gkce"
	--expression-attribute-values '{":pk":{"S":"COURSE#c10"},":prefix":{"S":"STUDENT#"}}')
ap4=(query --table-name edtech-platform --index-name GSI1 --key-condition-expression "$gkce"
	--expression-attribute-values '{":pk":{"S":"INSTRUCTOR#i5"},":prefix":{"S":"COURSE#"}}')
say "AP3: every student enrolled in course c10 (GSI1, the inverted index)"
await_count 4 "${ap3[@]}"
show "${ap3[@]}"
say "AP4: every course of instructor i5 (GSI1, overloaded)"
await_count 2 "${ap4[@]}"
show "${ap4[@]}"

say "Enroll s2 in c20 idempotently: the second attempt is refused"
item='{"PK":{"S":"STUDENT#s2"},"SK":{"S":"ENROLLMENT#c20"},"GSI1PK":{"S":"COURSE#c20"},"GSI1SK":{"S":"STUDENT#s2"},"progress":{"N":"0"}}'
show put-item --table-name edtech-platform --item "$item" --condition-expression 'attribute_not_exists(PK)'
shoal put-item --table-name edtech-platform --item "$item" --condition-expression 'attribute_not_exists(PK)' || true
say "The new enrolment reaches GSI1: AP3 for course c20"
ap3c20=(query --table-name edtech-platform --index-name GSI1 --key-condition-expression "$gkce"
	--expression-attribute-values '{":pk":{"S":"COURSE#c20"},":prefix":{"S":"STUDENT#"}}')
await_count 3 "${ap3c20[@]}"
show "${ap3c20[@]}"

say "Kill node 1 with SIGKILL; the cluster elects new leaders and keeps serving"
deploy/cluster.sh stop-node 1 --hard --dir "$dir"
show update-item --table-name edtech-platform --key '{"PK":{"S":"STUDENT#s2"},"SK":{"S":"ENROLLMENT#c20"}}' \
	--update-expression 'ADD progress :d' --expression-attribute-values '{":d":{"N":"15"}}' --return-values UPDATED_NEW
show get-item --consistent-read --table-name edtech-platform --key '{"PK":{"S":"STUDENT#s2"},"SK":{"S":"ENROLLMENT#c20"}}'
deploy/cluster.sh start-node 1 --dir "$dir"
deploy/cluster.sh wait --dir "$dir" # every group led, every replica answering
say "Cluster status after node 1 restarted"
shoal status

say "boto3 over HTTPS: verify= the cluster's CA, signed with the cluster's key (AP1)"
echo "\$ python3 -c 'boto3.client(\"dynamodb\", endpoint_url=\"$(cat "$dir/http.endpoint")\", verify=\"$dir/tls/ca.pem\").get_item(...)'"
/usr/bin/python3 - "$(cat "$dir/http.endpoint")" "$dir/tls/ca.pem" <<'EOF'
import json, sys
import boto3
c = boto3.client("dynamodb", endpoint_url=sys.argv[1], verify=sys.argv[2])
item = c.get_item(TableName="edtech-platform", Key={"PK": {"S": "STUDENT#s1"}, "SK": {"S": "PROFILE"}})
print(json.dumps(item["Item"], sort_keys=True))
EOF

say "GSI1 in DescribeTable"
shoal describe-table --table-name edtech-platform |
	jq -c '.Table.GlobalSecondaryIndexes[] | {IndexName, IndexStatus, ItemCount, WriteShards}'
if [[ ${DEMO_KEEP:-0} == 1 ]]; then
	echo "The cluster keeps running: SHOAL_ENDPOINT=file://$dir/router.endpoint; stop it with deploy/cluster.sh down --dir $dir"
fi
