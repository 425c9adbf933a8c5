"""DynamoDB's smaller operations and fields, through boto3 and the AWS CLI:
TagResource / UntagResource / ListTagsOfResource (and CreateTable's Tags),
DeletionProtectionEnabled, TableId and the ARNs, TableClassSummary,
BillingModeSummary, DeleteTable's answer, DescribeLimits, DescribeEndpoints
and CORS preflight.  Imported by test_http.py (run.sh's environment).

WholeClusterRestart stops every node and router with SIGKILL and starts them
again: tags and deletion protection are in group 0's replicated catalog, not
in any process's memory.  Its class name sorts last, so the suite's other
classes run before the restart.
"""
import configparser
import json
import os
import re
import subprocess
import time
import unittest
import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from sigv4 import HOST, PORT, auth_headers, auth_lines, connect, http_connection

ENDPOINT = os.environ["SHOAL_HTTP_ENDPOINT"]
DIR = os.environ["SHOAL_CLUSTER_DIR"]
BIN = os.environ["SHOAL_BIN"]
ROOT = os.environ["SHOAL_ROOT"]
AWS = "/usr/bin/aws"
SHOAL = os.path.join(BIN, "shoal")
NATIVE = "file://" + os.path.join(DIR, "router.endpoint")
CFG = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30)
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
ARN_RE = re.compile(r"^arn:aws:dynamodb:[a-z0-9-]+:[0-9]{12}:table/([a-zA-Z0-9_.-]+)$")
PROTECTED = ("Resource cannot be deleted as it is currently protected against deletion. "
             "Disable deletion protection first.")


def client():
    return boto3.client("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1", config=CFG)


def create(c, name=None, **kw):
    name = name or "so-" + uuid.uuid4().hex[:12]
    c.create_table(TableName=name,
                   AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                         {"AttributeName": "sk", "AttributeType": "S"},
                                         {"AttributeName": "g", "AttributeType": "S"}],
                   KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                              {"AttributeName": "sk", "KeyType": "RANGE"}],
                   GlobalSecondaryIndexes=[{"IndexName": "by-g",
                                            "KeySchema": [{"AttributeName": "g",
                                                           "KeyType": "HASH"}],
                                            "Projection": {"ProjectionType": "KEYS_ONLY"}}],
                   LocalSecondaryIndexes=[{"IndexName": "by-g-local",
                                           "KeySchema": [{"AttributeName": "pk",
                                                          "KeyType": "HASH"},
                                                         {"AttributeName": "g",
                                                          "KeyType": "RANGE"}],
                                           "Projection": {"ProjectionType": "ALL"}}],
                   BillingMode="PAY_PER_REQUEST", **kw)
    return name


def api(op, body):
    """DynamoDB JSON over HTTP, for what Debian's botocore model lacks
    (DeletionProtectionEnabled): (status, decoded body)."""
    conn = http_connection(30)
    try:
        data = json.dumps(body)
        headers = {"X-Amz-Target": "DynamoDB_20120810." + op,
                   "Content-Type": "application/x-amz-json-1.0"}
        headers.update(auth_headers("%s:%d" % (HOST, PORT), data, headers))
        conn.request("POST", "/", data, headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def protected(name):
    st, d = api("DescribeTable", {"TableName": name})
    assert st == 200, d
    return d["Table"]["DeletionProtectionEnabled"]


def set_protection(name, on):
    st, d = api("UpdateTable", {"TableName": name, "DeletionProtectionEnabled": on})
    assert st == 200, d
    return d["TableDescription"]["DeletionProtectionEnabled"]


def create_protected(c, **kw):
    """A table created with DeletionProtectionEnabled true (and kw: Tags)."""
    name = "so-" + uuid.uuid4().hex[:12]
    body = {"TableName": name,
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                     {"AttributeName": "sk", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                          {"AttributeName": "sk", "KeyType": "RANGE"}],
            "BillingMode": "PAY_PER_REQUEST", "DeletionProtectionEnabled": True}
    body.update(kw)
    st, d = api("CreateTable", body)
    assert st == 200, d
    assert d["TableDescription"]["DeletionProtectionEnabled"] is True
    return name


def tags_of(c, arn):
    return sorted((t["Key"], t["Value"]) for t in c.list_tags_of_resource(ResourceArn=arn)["Tags"])


def raw(data, timeout=10.0):
    """Raw bytes on a new connection: (status, headers, body)."""
    s = connect(timeout)
    try:
        s.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                return None
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return int(lines[0].split()[1]), headers, rest[:n]
    finally:
        s.close()


class SmallOps(unittest.TestCase):
    def setUp(self):
        self.c = client()

    def error(self, fn, code, message=None, **kw):
        with self.assertRaises(ClientError) as cm:
            fn(**kw)
        err = cm.exception.response["Error"]
        self.assertEqual(err["Code"], code, err)
        if message is not None:
            if isinstance(message, re.Pattern):
                self.assertRegex(err["Message"], message)
            else:
                self.assertEqual(err["Message"], message)
        return err["Message"]

    # -- Tags ---------------------------------------------------------------

    def test_tags(self):
        c = self.c
        name = create(c, Tags=[{"Key": "team", "Value": "edu"}, {"Key": "empty", "Value": ""}])
        desc = c.describe_table(TableName=name)["Table"]
        arn = desc["TableArn"]
        self.assertEqual(tags_of(c, arn), [("empty", ""), ("team", "edu")])
        # Tag: a new key and a changed value; untag one present and one
        # absent key (absent is no error).
        c.tag_resource(ResourceArn=arn, Tags=[{"Key": "team", "Value": "ops"},
                                              {"Key": "cost center", "Value": "a+b=c:d/e_f.g-h@i"}])
        self.assertEqual(tags_of(c, arn), [("cost center", "a+b=c:d/e_f.g-h@i"), ("empty", ""),
                                           ("team", "ops")])
        c.untag_resource(ResourceArn=arn, TagKeys=["empty", "never-there"])
        self.assertEqual(tags_of(c, arn), [("cost center", "a+b=c:d/e_f.g-h@i"), ("team", "ops")])
        # An ARN built with another region and account names the same table.
        other = "arn:aws:dynamodb:eu-west-1:123456789012:table/" + name
        self.assertEqual(len(tags_of(c, other)), 2)

        # 50 at most, counting the table's: 2 + 49 is refused, changing
        # nothing; 2 + 48 is accepted.
        many = [{"Key": "k%d" % i, "Value": "v"} for i in range(49)]
        self.error(c.tag_resource, "ValidationException",
                   "One or more parameter values were invalid: The table would have 51 tags, "
                   "more than the tag limit of 50", ResourceArn=arn, Tags=many)
        self.assertEqual(len(tags_of(c, arn)), 2)
        c.tag_resource(ResourceArn=arn, Tags=many[:48])
        self.assertEqual(len(tags_of(c, arn)), 50)

        # Documented errors.
        self.error(c.tag_resource, "ValidationException",
                   "Atleast one Tag needs to be provided as Input.", ResourceArn=arn, Tags=[])
        self.error(c.untag_resource, "ValidationException",
                   "Atleast one Tag Key needs to be provided as Input.", ResourceArn=arn,
                   TagKeys=[])
        self.error(c.tag_resource, "ValidationException",
                   re.compile(r"aws: is reserved"), ResourceArn=arn,
                   Tags=[{"Key": "aws:owner", "Value": "x"}])
        self.error(c.tag_resource, "ValidationException",
                   re.compile(r"character that is not allowed"), ResourceArn=arn,
                   Tags=[{"Key": "ok", "Value": "#!%"}])
        self.error(c.tag_resource, "ValidationException",
                   re.compile(r"at 'tags.1.member.key' failed to satisfy constraint: Member must "
                              r"have length less than or equal to 128"),
                   ResourceArn=arn, Tags=[{"Key": "k" * 129, "Value": "x"}])
        self.error(c.tag_resource, "ValidationException",
                   re.compile(r"Member must have length less than or equal to 256"),
                   ResourceArn=arn, Tags=[{"Key": "k", "Value": "v" * 257}])
        self.assertEqual(len(tags_of(c, arn)), 50)
        # Index ARNs are not taggable, as in DynamoDB.
        for ix in desc["GlobalSecondaryIndexes"] + desc["LocalSecondaryIndexes"]:
            for fn, kw in ((c.list_tags_of_resource, {}),
                           (c.tag_resource, {"Tags": [{"Key": "a", "Value": "b"}]}),
                           (c.untag_resource, {"TagKeys": ["a"]})):
                self.error(fn, "ValidationException",
                           "Invalid TableArn: Invalid ResourceArn provided as input "
                           + ix["IndexArn"], ResourceArn=ix["IndexArn"], **kw)
        self.error(c.list_tags_of_resource, "ValidationException",
                   "Invalid TableArn: Invalid ResourceArn provided as input I_do_not_exist",
                   ResourceArn="I_do_not_exist")
        gone = arn + "-missing"
        for fn, kw in ((c.list_tags_of_resource, {}),
                       (c.tag_resource, {"Tags": [{"Key": "a", "Value": "b"}]}),
                       (c.untag_resource, {"TagKeys": ["a"]})):
            self.error(fn, "ResourceNotFoundException",
                       "Requested resource not found: ResourcArn: %s not found" % gone,
                       ResourceArn=gone, **kw)

        # Tags go with the table: a table created again under the name has none.
        c.delete_table(TableName=name)
        create(c, name=name)
        self.assertEqual(tags_of(c, arn), [])

    def test_create_table_tags_refused(self):
        c = self.c
        name = "so-" + uuid.uuid4().hex[:12]
        self.error(create, "ValidationException",
                   re.compile(r"The table would have 51 tags"), c=c, name=name,
                   Tags=[{"Key": "k%d" % i, "Value": ""} for i in range(51)])
        self.error(create, "ValidationException", "One or more parameter values were invalid: "
                   "Duplicate tag key: a", c=c, name=name,
                   Tags=[{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}])
        self.error(c.describe_table, "ResourceNotFoundException", TableName=name)

    # -- Deletion protection, ids, ARNs, summaries --------------------------

    def test_deletion_protection(self):
        c = self.c
        name = create_protected(c)
        self.assertTrue(protected(name))
        self.error(c.delete_table, "ValidationException", PROTECTED, TableName=name)
        c.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"S": "1"}})
        self.assertEqual(c.describe_table(TableName=name)["Table"]["TableStatus"], "ACTIVE")
        self.assertIn("Item", c.get_item(TableName=name,
                                         Key={"pk": {"S": "a"}, "sk": {"S": "1"}}))
        self.assertFalse(set_protection(name, False))
        self.assertFalse(protected(name))
        self.assertTrue(set_protection(name, True))
        self.error(c.delete_table, "ValidationException", PROTECTED, TableName=name)
        self.assertFalse(set_protection(name, False))
        before = c.describe_table(TableName=name)["Table"]
        gone = c.delete_table(TableName=name)["TableDescription"]
        self.assertEqual(gone["TableStatus"], "DELETING")
        self.assertEqual(gone["TableName"], name)
        self.assertEqual(gone["TableArn"], before["TableArn"])
        self.assertEqual(gone["TableId"], before["TableId"])
        self.assertEqual(gone["KeySchema"], before["KeySchema"])
        self.error(c.describe_table, "ResourceNotFoundException", TableName=name)
        # Unprotected by default.
        other = create(c)
        self.assertFalse(protected(other))
        c.delete_table(TableName=other)

    def test_ids_arns_summaries(self):
        c = self.c
        name = create(c)
        d = c.describe_table(TableName=name)["Table"]
        self.assertRegex(d["TableId"], UUID_RE)
        self.assertEqual(ARN_RE.match(d["TableArn"]).group(1), name)
        for ix in d["GlobalSecondaryIndexes"] + d["LocalSecondaryIndexes"]:
            self.assertEqual(ix["IndexArn"], d["TableArn"] + "/index/" + ix["IndexName"])
        self.assertEqual(d["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST")
        self.assertEqual(d["BillingModeSummary"]["LastUpdateToPayPerRequestDateTime"],
                         d["CreationDateTime"])
        self.assertNotIn("TableClassSummary", d)
        # Stable for the table's life (an UpdateTable, a tag, items) ...
        c.update_table(TableName=name, TableClass="STANDARD_INFREQUENT_ACCESS")
        c.tag_resource(ResourceArn=d["TableArn"], Tags=[{"Key": "a", "Value": "b"}])
        d2 = c.describe_table(TableName=name)["Table"]
        self.assertEqual(d2["TableId"], d["TableId"])
        self.assertEqual(d2["TableClassSummary"]["TableClass"], "STANDARD_INFREQUENT_ACCESS")
        self.assertGreaterEqual(d2["TableClassSummary"]["LastUpdateDateTime"],
                                d["CreationDateTime"])
        self.error(c.update_table, "ValidationException",
                   "1 validation error detected: Value 'GLACIER' at 'tableClass' failed to "
                   "satisfy constraint: Member must satisfy enum value set: [STANDARD, "
                   "STANDARD_INFREQUENT_ACCESS]", TableName=name, TableClass="GLACIER")
        # ... and another for a table created again under the same name.
        c.delete_table(TableName=name)
        create(c, name=name, TableClass="STANDARD")
        d3 = c.describe_table(TableName=name)["Table"]
        self.assertNotEqual(d3["TableId"], d["TableId"])
        self.assertEqual(d3["TableArn"], d["TableArn"])
        self.assertEqual(d3["TableClassSummary"], {"TableClass": "STANDARD"})
        c.delete_table(TableName=name)

    def test_provisioned_billing_summary(self):
        c = self.c
        name = "so-" + uuid.uuid4().hex[:12]
        c.create_table(TableName=name,
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                       KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5})
        d = c.describe_table(TableName=name)["Table"]
        self.assertNotIn("BillingModeSummary", d)  # never PAY_PER_REQUEST, as DynamoDB
        c.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")
        d = c.describe_table(TableName=name)["Table"]
        self.assertEqual(d["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST")
        self.assertGreaterEqual(d["BillingModeSummary"]["LastUpdateToPayPerRequestDateTime"],
                                d["CreationDateTime"])
        c.delete_table(TableName=name)

    # -- Limits on names, projections of new indexes -------------------------

    def test_name_limits(self):
        c = self.c
        long_key = "k" * 256
        self.error(c.create_table, "ValidationException",
                   re.compile(r"^2 validation errors detected: Value 'k{256}' at "
                              r"'attributeDefinitions.1.member.attributeName' failed to satisfy "
                              r"constraint: Member must have length less than or equal to 255; "
                              r"Value 'k+"),
                   TableName="so-" + uuid.uuid4().hex[:12],
                   AttributeDefinitions=[{"AttributeName": long_key, "AttributeType": "S"}],
                   KeySchema=[{"AttributeName": long_key, "KeyType": "HASH"}],
                   BillingMode="PAY_PER_REQUEST")
        name = create(c)
        key = {"pk": {"S": "a"}, "sk": {"S": "1"}}
        # A non-key attribute name: up to 64 KB (Shoal: 65535 bytes, its
        # stored names' u16 length), not one byte more.
        c.put_item(TableName=name, Item=dict(key, **{"n" * 65535: {"S": "v"}}))
        self.assertIn("n" * 65535, c.get_item(TableName=name, Key=key)["Item"])
        self.error(c.put_item, "ValidationException",
                   "One or more parameter values were invalid: Attribute name is too long: "
                   "65536 bytes, the limit is 65535 bytes",
                   TableName=name, Item=dict(key, **{"n" * 65536: {"S": "v"}}))
        c.delete_table(TableName=name)

    def test_new_index_projections(self):
        c = self.c
        attrs = [{"AttributeName": "pk", "AttributeType": "S"},
                 {"AttributeName": "g", "AttributeType": "S"}]
        def gsi(projection):
            return [{"IndexName": "by-g", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                     "Projection": projection}]
        for projection, message in (
                ({"ProjectionType": "INCLUDE"},
                 "One or more parameter values were invalid: ProjectionType is INCLUDE, but "
                 "NonKeyAttributes is not specified"),
                ({"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a", "b", "a"]},
                 "One or more parameter values were invalid: Duplicate attribute name in "
                 "NonKeyAttributes: a"),
                ({"ProjectionType": "KEYS_ONLY", "NonKeyAttributes": ["a"]},
                 "One or more parameter values were invalid: ProjectionType is KEYS_ONLY, but "
                 "NonKeyAttributes is specified")):
            name = "so-" + uuid.uuid4().hex[:12]
            self.error(c.create_table, "ValidationException", message, TableName=name,
                       AttributeDefinitions=attrs,
                       KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       GlobalSecondaryIndexes=gsi(projection), BillingMode="PAY_PER_REQUEST")
            self.error(c.describe_table, "ResourceNotFoundException", TableName=name)
        name = "so-" + uuid.uuid4().hex[:12]
        c.create_table(TableName=name, AttributeDefinitions=attrs[:1],
                       KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       BillingMode="PAY_PER_REQUEST")
        self.error(c.update_table, "ValidationException",
                   "One or more parameter values were invalid: ProjectionType is INCLUDE, but "
                   "NonKeyAttributes is not specified", TableName=name, AttributeDefinitions=attrs,
                   GlobalSecondaryIndexUpdates=[{"Create": gsi({"ProjectionType": "INCLUDE"})[0]}])
        self.assertNotIn("GlobalSecondaryIndexes", c.describe_table(TableName=name)["Table"])
        c.delete_table(TableName=name)

    # -- DescribeLimits, DescribeEndpoints ----------------------------------

    def test_describe_limits(self):
        ini = configparser.ConfigParser(inline_comment_prefixes=(";",))
        ini.read(os.path.join(DIR, "cluster.ini"))
        groups = int(ini["cluster"]["groups"])
        parts = groups - 1 if groups > 1 else 1
        # table_partitions, rounded up to a multiple of the data groups
        tp = int(ini["cluster"].get("table_partitions", "0"))
        parts = max(parts, -(-tp // parts) * parts)
        rcu = int(ini["cluster"].get("partition_rcu", "3000"))
        wcu = int(ini["cluster"].get("partition_wcu", "1000"))
        got = self.c.describe_limits()
        want = {"AccountMaxReadCapacityUnits": rcu * parts,
                "AccountMaxWriteCapacityUnits": wcu * parts,
                "TableMaxReadCapacityUnits": rcu * parts,
                "TableMaxWriteCapacityUnits": wcu * parts}
        self.assertEqual({k: got[k] for k in want}, want)

    def test_describe_endpoints(self):
        got = self.c.describe_endpoints()["Endpoints"]
        self.assertEqual(got, [{"Address": "127.0.0.1:%d" % PORT, "CachePeriodInMinutes": 1440}])

    # -- CORS -----------------------------------------------------------------

    def test_cors(self):
        st, h, body = raw(b"OPTIONS / HTTP/1.1\r\nHost: x\r\nOrigin: http://app.example\r\n"
                          b"Access-Control-Request-Method: POST\r\n"
                          b"Access-Control-Request-Headers: content-type,x-amz-target,"
                          b"authorization\r\n\r\n")
        self.assertEqual(st, 200)
        self.assertEqual(body, b"")
        self.assertEqual(h["access-control-allow-origin"], "*")
        self.assertEqual(h["access-control-allow-methods"], "POST")
        self.assertEqual(h["access-control-allow-headers"],
                         "content-type,x-amz-target,authorization")
        self.assertEqual(h["access-control-max-age"], "172800")
        self.assertEqual(len(h["x-amzn-requestid"]), 52)
        # The request itself, from the page: readable by it.
        body = b"{}"
        sign = auth_lines("x", body, {"X-Amz-Target": "DynamoDB_20120810.ListTables",
                                      "Content-Type": "application/x-amz-json-1.0"})
        st, h, out = raw(b"POST / HTTP/1.1\r\nHost: x\r\nOrigin: http://app.example\r\n"
                         b"X-Amz-Target: DynamoDB_20120810.ListTables\r\n"
                         b"Content-Type: application/x-amz-json-1.0\r\n" + sign +
                         b"Content-Length: 2\r\n\r\n" + body)
        self.assertEqual(st, 200)
        self.assertEqual(h["access-control-allow-origin"], "*")
        self.assertIn("x-amzn-RequestId", h["access-control-expose-headers"])
        self.assertIn("TableNames", json.loads(out))
        # Without Origin: no CORS headers, and OPTIONS is not an operation.
        st, h, _ = raw(b"POST / HTTP/1.1\r\nHost: x\r\n"
                       b"X-Amz-Target: DynamoDB_20120810.ListTables\r\n"
                       b"Content-Type: application/x-amz-json-1.0\r\n" + sign +
                       b"Content-Length: 2\r\n\r\n{}")
        self.assertEqual(st, 200)
        self.assertNotIn("access-control-allow-origin", h)
        st, _, _ = raw(b"OPTIONS / HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(st, 405)

    # -- Chunked bodies ---------------------------------------------------------

    def test_chunked(self):
        name = create(self.c)
        body = json.dumps({"TableName": name, "Item": {"pk": {"S": "c"}, "sk": {"S": "1"},
                                                       "v": {"S": "x" * 5000}}}).encode()
        # Signed for the decoded body, as SigV4 signs a chunked one.
        head = (b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.PutItem\r\n"
                b"Content-Type: application/x-amz-json-1.0\r\n" +
                auth_lines("x", body, {"X-Amz-Target": "DynamoDB_20120810.PutItem",
                                       "Content-Type": "application/x-amz-json-1.0"}) +
                b"Transfer-Encoding: chunked\r\n\r\n")
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 1000]), body[i:i + 1000])
                          for i in range(0, len(body), 1000))
        st, _, out = raw(head + chunks + b"0\r\n\r\n")
        self.assertEqual(st, 200, out)
        got = self.c.get_item(TableName=name, Key={"pk": {"S": "c"}, "sk": {"S": "1"}})
        self.assertEqual(len(got["Item"]["v"]["S"]), 5000)
        # Decoding past 16 MiB (the largest request DynamoDB takes): 413, and
        # the connection closes; a size announcing it is refused at once.
        st, h, _ = raw(head + b"1000001\r\n")
        self.assertEqual(st, 413)
        self.assertEqual(h.get("connection"), "close")
        s = connect(30)
        try:
            s.sendall(head)
            piece = b"x" * (1 << 20)
            status = None
            for _ in range(17):  # 17 chunks of 1 MiB: over the limit in the last
                try:
                    s.sendall(b"100000\r\n" + piece + b"\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    break
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            status = int(buf.split(b"\r\n")[0].split()[1])
            self.assertEqual(status, 413)
        finally:
            s.close()
        self.assertEqual(self.c.describe_table(TableName=name)["Table"]["TableStatus"], "ACTIVE")
        self.c.delete_table(TableName=name)

    # -- The AWS CLI and shoal, unchanged ------------------------------------

    def aws(self, *args):
        r = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb"] + list(args),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout) if r.stdout.strip() else None

    def test_aws_cli(self):
        c = self.c
        name = create(c)
        arn = c.describe_table(TableName=name)["Table"]["TableArn"]
        self.aws("tag-resource", "--resource-arn", arn, "--tags", "Key=team,Value=edu",
                 "Key=env,Value=")
        got = self.aws("list-tags-of-resource", "--resource-arn", arn)
        self.assertEqual(sorted((t["Key"], t["Value"]) for t in got["Tags"]),
                         [("env", ""), ("team", "edu")])
        self.aws("untag-resource", "--resource-arn", arn, "--tag-keys", "env")
        self.assertEqual(self.aws("list-tags-of-resource", "--resource-arn", arn)["Tags"],
                         [{"Key": "team", "Value": "edu"}])
        limits = self.aws("describe-limits")
        want = {k: v for k, v in self.c.describe_limits().items() if k != "ResponseMetadata"}
        self.assertEqual(limits, want)
        self.assertEqual(self.aws("describe-endpoints")["Endpoints"][0]["CachePeriodInMinutes"],
                         1440)
        # (Debian's AWS CLI model has no --deletion-protection-enabled: shoal's does.)
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "update-table", "--table-name", name,
                            "--deletion-protection-enabled"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(json.loads(r.stdout)["TableDescription"]["DeletionProtectionEnabled"])
        r = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "dynamodb", "delete-table",
                            "--table-name", name], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("An error occurred (ValidationException) when calling the DeleteTable "
                      "operation: " + PROTECTED, r.stderr)
        # shoal (native protocol) says the same, and lists the same tags.
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "list-tags-of-resource",
                            "--resource-arn", arn], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["Tags"], [{"Key": "team", "Value": "edu"}])
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "delete-table", "--table-name", name],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("An error occurred (ValidationException) when calling the DeleteTable "
                      "operation: " + PROTECTED, r.stderr)
        r = subprocess.run([SHOAL, "--endpoint", NATIVE, "update-table", "--table-name", name,
                            "--no-deletion-protection-enabled"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.aws("delete-table", "--table-name", name)
                         ["TableDescription"]["TableStatus"], "DELETING")


class WholeClusterRestart(unittest.TestCase):
    """Last (by name): every process killed and started again."""

    def cluster(self, *args):
        r = subprocess.run([os.path.join(ROOT, "deploy", "cluster.sh")] + list(args)
                           + ["--dir", DIR], capture_output=True, text=True, timeout=180,
                           env=dict(os.environ, SHOAL_BIN=BIN))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_tags_and_protection_survive(self):
        c = client()
        name = create_protected(c, Tags=[{"Key": "team", "Value": "edu"}])
        d = c.describe_table(TableName=name)["Table"]
        c.tag_resource(ResourceArn=d["TableArn"], Tags=[{"Key": "later", "Value": "set"}])
        c.untag_resource(ResourceArn=d["TableArn"], TagKeys=["team"])
        ini = configparser.ConfigParser(inline_comment_prefixes=(";",))
        ini.read(os.path.join(DIR, "cluster.ini"))
        nodes = sorted(int(s.split(".")[1]) for s in ini.sections() if s.startswith("node."))
        routers = sorted(int(f[len("router-"):-len(".pid")]) for f in os.listdir(DIR)
                         if re.match(r"^router-\d+\.pid$", f))
        for r in routers:
            self.cluster("stop-router", str(r), "--hard")
        for n in nodes:
            self.cluster("stop-node", str(n), "--hard")
        for n in nodes:
            self.cluster("start-node", str(n))
        for r in routers:
            self.cluster("start-router", str(r))
        self.cluster("wait")
        deadline = time.monotonic() + 60
        while True:
            try:
                got = client().describe_table(TableName=name)["Table"]
                break
            except Exception:  # the router still connecting: poll with a deadline
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        c = client()
        self.assertEqual(tags_of(c, d["TableArn"]), [("later", "set")])
        self.assertTrue(protected(name))
        self.assertEqual(got["TableId"], d["TableId"])
        with self.assertRaises(ClientError) as cm:
            c.delete_table(TableName=name)
        self.assertEqual(cm.exception.response["Error"]["Message"], PROTECTED)
        set_protection(name, False)
        c.delete_table(TableName=name)
