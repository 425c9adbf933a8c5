"""The suite against botocore's service models (Debian's python3-botocore:
data/dynamodb/2012-08-10 and data/dynamodbstreams/2012-08-10): every
operation Shoal serves has its file here, and every error the model
documents for it is named in that file or listed below with the reason it is
not; every parameter of its input is named there too (or listed with the
file that checks it); every operation Shoal does not serve answers
UnknownOperationException.
"""
import json
import os
import re

import botocore

from conformance import Case, api, main

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(os.path.dirname(botocore.__file__), "data")

# Served operation -> its file.
FILES = {
    "GetItem": "test_get_item", "PutItem": "test_put_item", "UpdateItem": "test_update_item",
    "DeleteItem": "test_delete_item", "Query": "test_query", "Scan": "test_scan",
    "BatchGetItem": "test_batch_get_item", "BatchWriteItem": "test_batch_write_item",
    "TransactGetItems": "test_transact_items", "TransactWriteItems": "test_transact_items",
    "CreateTable": "test_create_table", "UpdateTable": "test_update_table",
    "DeleteTable": "test_delete_table", "DescribeTable": "test_describe_table",
    "ListTables": "test_list_tables",
    "UpdateTimeToLive": "test_time_to_live", "DescribeTimeToLive": "test_time_to_live",
    "TagResource": "test_tags", "UntagResource": "test_tags", "ListTagsOfResource": "test_tags",
    "DescribeLimits": "test_describe_limits", "DescribeEndpoints": "test_describe_limits",
    "ListStreams": "test_streams", "DescribeStream": "test_streams",
    "GetShardIterator": "test_streams", "GetRecords": "test_streams",
}

# Documented errors a request cannot provoke here, or that another test
# provokes because it needs load, time or a crash.
ELSEWHERE = {
    "InternalServerError": "a server fault, not something a request provokes",
    "RequestLimitExceeded": "the account's request rate: no account limit in Shoal",
    "LimitExceededException": "concurrent control-plane operations of an account",
    "ProvisionedThroughputExceededException": "needs load: it_capacity, test_provisioned.py",
    "ItemCollectionSizeLimitExceededException": "needs a 10 GB item collection: test_fsm",
    "TransactionConflictException": "needs concurrency: test_txn.py, it_bank",
    "TransactionInProgressException": "a token reused while its transaction runs: it_bank",
    "ExpiredIteratorException": "an iterator older than 15 minutes: test_streams.py (http)",
    "TrimmedDataAccessException": "records past retention: test_stream (unit)",
}
# Parameters checked elsewhere.
PARAMS_ELSEWHERE = {
    ("CreateTable", "ProvisionedThroughput"): "test_provisioned.py (tests/integration/http)",
    ("UpdateTable", "ProvisionedThroughput"): "test_provisioned.py (tests/integration/http)",
}
# Per operation: ResourceInUseException where it needs a table mid-change.
IN_USE = {"DeleteTable", "UpdateTable", "TagResource", "UntagResource", "UpdateTimeToLive"}


def code_of(name):
    """The file of an operation, and its code without the module docstring
    (naming a parameter or an error there checks nothing)."""
    with open(os.path.join(HERE, FILES[name] + ".py")) as f:
        text = f.read()
    return text, text.split('"""', 2)[2]


def model(service):
    with open(os.path.join(MODELS, service, "2012-08-10", "service-2.json")) as f:
        return json.load(f)


class ServiceModel(Case):
    @classmethod
    def setUpClass(cls):
        cls.ddb = model("dynamodb")
        cls.streams = model("dynamodbstreams")

    def ops(self):
        for svc, prefix in ((self.ddb, "DynamoDB_20120810"),
                            (self.streams, "DynamoDBStreams_20120810")):
            for name, op in svc["operations"].items():
                yield name, op, prefix

    def test_every_served_operation_has_its_file(self):
        for name, op, _ in self.ops():
            if name not in FILES:
                continue
            with self.subTest(op=name):
                text, code = code_of(name)
                # The file's docstring names the operation.
                self.assertIn(name, text.split('"""')[1])
                for err in (e["shape"] for e in op.get("errors", [])):
                    if err in ELSEWHERE or (err == "ResourceInUseException" and name in IN_USE):
                        continue
                    self.assertTrue(re.search(r"\b%s\b" % re.escape(err), code),
                                    "%s documents %s: not checked in %s.py"
                                    % (name, err, FILES[name]))

    def test_every_parameter_is_named(self):
        for name, op, _ in self.ops():
            if name not in FILES or "input" not in op:
                continue
            svc = self.ddb if name in self.ddb["operations"] else self.streams
            _, code = code_of(name)
            for member in svc["shapes"][op["input"]["shape"]]["members"]:
                if (name, member) in PARAMS_ELSEWHERE:
                    continue
                with self.subTest(op=name, parameter=member):
                    self.assertTrue(re.search(r"\b%s\b" % member, code),
                                    "%s.%s: not exercised in %s.py" % (name, member, FILES[name]))

    def test_every_other_operation_is_unknown(self):
        for name, _, prefix in self.ops():
            if name in FILES:
                continue
            with self.subTest(op=name):
                st, d = api(name, {}, prefix)
                self.assertEqual((st, d.get("__type", "").split("#")[-1]),
                                 (400, "UnknownOperationException"), d)


if __name__ == "__main__":
    main([__file__])
