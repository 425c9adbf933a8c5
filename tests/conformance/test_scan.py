"""Scan: TableName, IndexName, FilterExpression and ScanFilter (legacy) with
ConditionalOperator, ProjectionExpression and AttributesToGet (legacy),
Select, Limit, ExclusiveStartKey, Segment/TotalSegments, ConsistentRead;
errors ResourceNotFoundException and ValidationException.  Every scan is
made both ways and must give the same items."""
import re

from conformance import RANGE, Case, N, S, constraint, main, uid

# (ScanFilter, ConditionalOperator, FilterExpression, values); pk restricts
# the scan to the suite's read items (other tests write to RANGE too).
OURS = {"pk": {"ComparisonOperator": "IN", "AttributeValueList": [S("r1"), S("r2")]}}
FILTERS = [
    ({}, None, "", {}),
    ({"n": {"ComparisonOperator": "GE", "AttributeValueList": [N(50)]}}, None, "n >= :a",
     {":a": N(50)}),
    ({"opt": {"ComparisonOperator": "NOT_NULL"}}, None, "attribute_exists(opt)", {}),
    ({"s": {"ComparisonOperator": "EQ", "AttributeValueList": [S("item-3")]},
      "n": {"ComparisonOperator": "EQ", "AttributeValueList": [N(100)]}}, "OR",
     "s = :a OR n = :b", {":a": S("item-3"), ":b": N(100)}),
    ({"sk": {"ComparisonOperator": "BETWEEN", "AttributeValueList": [N(2), N(4)]}}, None,
     "sk BETWEEN :a AND :b", {":a": N(2), ":b": N(4)}),
    ({"tags": {"ComparisonOperator": "NOT_CONTAINS", "AttributeValueList": [S("odd")]}}, None,
     "attribute_exists(tags) AND NOT contains(tags, :a)", {":a": S("odd")}),
]


def key_of(i):
    return (i["pk"]["S"], int(i["sk"]["N"]))


class Scan(Case):
    def scan_all(self, **kw):
        items, scanned, start = [], 0, None
        while True:
            page = {"ExclusiveStartKey": start} if start else {}
            r = self.c.scan(TableName=RANGE, **kw, **page)
            items += r.get("Items", [])
            scanned += r["ScannedCount"]
            start = r.get("LastEvaluatedKey")
            if not start:
                return sorted(items, key=key_of), scanned

    def test_filters_both_ways(self):
        for sf, op, text, values in FILTERS:
            with self.subTest(filter=text):
                legacy = {"ScanFilter": dict(OURS, **sf)}
                if op == "OR":  # the pk restriction must still hold: filter after
                    legacy = {"ScanFilter": sf, "ConditionalOperator": "OR"}
                modern = {"FilterExpression": "pk IN (:r1, :r2)" + (
                    " AND (%s)" % text if text and op != "OR" else ""),
                    "ExpressionAttributeValues": dict({":r1": S("r1"), ":r2": S("r2")}, **values)}
                if op == "OR":
                    modern = {"FilterExpression": text, "ExpressionAttributeValues": values}
                a, _ = self.scan_all(Limit=7, **legacy)
                b, _ = self.scan_all(Limit=7, **modern)
                if op == "OR":
                    a = [i for i in a if i["pk"]["S"] in ("r1", "r2")]
                    b = [i for i in b if i["pk"]["S"] in ("r1", "r2")]
                self.assertEqual(a, b)
                self.assertGreater(len(a), 0)

    def test_projection_both_ways(self):
        a, _ = self.scan_all(AttributesToGet=["pk", "sk", "n"], ScanFilter=OURS)
        b, _ = self.scan_all(ProjectionExpression="pk, sk, n", FilterExpression="pk IN (:a, :b)",
                             ExpressionAttributeValues={":a": S("r1"), ":b": S("r2")})
        self.assertEqual(a, b)
        self.assertEqual(len(a), 20)
        self.assertEqual(set(a[0]), {"pk", "sk", "n"})

    def test_names_and_capacity(self):
        r = self.c.scan(TableName=RANGE, ProjectionExpression="#k, #n", FilterExpression="#k = :p",
                        ExpressionAttributeNames={"#k": "pk", "#n": "n"},
                        ExpressionAttributeValues={":p": S("r2")}, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(sorted(int(i["n"]["N"]) for i in r["Items"]),
                         [10 * k for k in range(1, 11)])
        self.assertEqual(r["ConsumedCapacity"]["TableName"], RANGE)
        self.assertGreater(r["ConsumedCapacity"]["CapacityUnits"], 0)

    def test_segments(self):
        whole, _ = self.scan_all(ConsistentRead=True)
        for total in (1, 2, 3, 7):
            with self.subTest(total=total):
                parts = []
                for seg in range(total):
                    got, _ = self.scan_all(Segment=seg, TotalSegments=total, Limit=5)
                    parts += got
                self.assertEqual(sorted(parts, key=key_of), whole)

    def test_segment_of_start_key(self):
        # The fuller segment (it holds r1 or r2): a first page that stops at Limit.
        counts = [self.c.scan(TableName=RANGE, Segment=s, TotalSegments=2,
                              Select="COUNT")["Count"] for s in (0, 1)]
        seg = 0 if counts[0] >= counts[1] else 1
        first = self.c.scan(TableName=RANGE, Segment=seg, TotalSegments=2, Limit=1)
        self.assertIn("LastEvaluatedKey", first)
        self.invalid(self.c.scan, re.compile(
            r"^The provided starting key is invalid: Invalid ExclusiveStartKey\. Please use "
            r"ExclusiveStartKey with correct Segment\. TotalSegments: 2 Segment: %d$" % (1 - seg)),
            TableName=RANGE, Segment=1 - seg, TotalSegments=2,
            ExclusiveStartKey=first["LastEvaluatedKey"])

    def test_select_and_index(self):
        r = self.c.scan(TableName=RANGE, Select="COUNT", ScanFilter=OURS)
        self.assertNotIn("Items", r)
        self.assertEqual(r["Count"], 20)
        r = self.c.scan(TableName=RANGE, IndexName="byL", FilterExpression="pk IN (:a, :b)",
                        ExpressionAttributeValues={":a": S("r1"), ":b": S("r2")})
        self.assertEqual(r["Count"], 12)  # sk 1..6 of both partitions carry l
        r = self.c.scan(TableName=RANGE, IndexName="byG", Select="ALL_PROJECTED_ATTRIBUTES",
                        FilterExpression="pk = :a", ExpressionAttributeValues={":a": S("r1")})
        self.assertEqual(r["Count"], 10)
        for i in r["Items"]:
            self.assertEqual(set(i), {"pk", "sk", "g", "x"})

    def test_errors(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.scan, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t)
        self.invalid(self.c.scan, "The table does not have the specified index: nope",
                     TableName=RANGE, IndexName="nope")
        self.invalid(self.c.scan, "The TotalSegments parameter is required but was not present "
                     "in the request when Segment parameter is present", TableName=RANGE,
                     Segment=0)
        self.invalid(self.c.scan, "The Segment parameter is required but was not present in "
                     "the request when parameter TotalSegments is present", TableName=RANGE,
                     TotalSegments=2)
        self.invalid(self.c.scan, "The Segment parameter is zero-based and must be less than "
                     "parameter TotalSegments: Segment: 2 is not less than TotalSegments: 2",
                     TableName=RANGE, Segment=2, TotalSegments=2)
        self.invalid(self.raw.scan, constraint("'1000001'", "totalSegments",
                                               "have value less than or equal to 1000000"),
                     TableName=RANGE, Segment=0, TotalSegments=1000001)
        self.invalid(self.raw.scan, constraint("'0'", "totalSegments",
                                               "have value greater than or equal to 1"),
                     TableName=RANGE, Segment=0, TotalSegments=0)
        self.invalid(self.c.scan, "Consistent reads are not supported on global secondary "
                     "indexes", TableName=RANGE, IndexName="byG", ConsistentRead=True)
        self.invalid(self.c.scan, "Can not use both expression and non-expression parameters in "
                     "the same request: Non-expression parameters: {ScanFilter} Expression "
                     "parameters: {FilterExpression}", TableName=RANGE, ScanFilter=OURS,
                     FilterExpression="attribute_exists(n)")
        self.invalid(self.c.scan, "ConditionalOperator can only be used when Filter or Expected "
                     "has two or more elements", TableName=RANGE, ScanFilter=OURS,
                     ConditionalOperator="OR")
        self.invalid(self.c.scan, re.compile(r"^The provided starting key is invalid"),
                     TableName=RANGE, ExclusiveStartKey={"pk": S("r1")})
        self.invalid(self.raw.scan, constraint("'0'", "limit",
                                               "have value greater than or equal to 1"),
                     TableName=RANGE, Limit=0)


if __name__ == "__main__":
    main([__file__])
