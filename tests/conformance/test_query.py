"""Query: TableName, IndexName (LSI and GSI), KeyConditionExpression and
KeyConditions (legacy), FilterExpression and QueryFilter (legacy) with
ConditionalOperator, ProjectionExpression and AttributesToGet (legacy),
Select, Limit, ScanIndexForward, ExclusiveStartKey, ConsistentRead,
ReturnConsumedCapacity; errors ResourceNotFoundException and
ValidationException.  Every read is made both ways, legacy and expression,
and must give the same items."""
import re

from conformance import RANGE, Case, N, S, constraint, main, read_item, uid

PK = {"pk": {"ComparisonOperator": "EQ", "AttributeValueList": [S("r1")]}}

# (KeyConditions for sk, the KeyConditionExpression's sort key part, values)
SORT = [
    (None, None, {}),
    ({"ComparisonOperator": "EQ", "AttributeValueList": [N(3)]}, "sk = :a", {":a": N(3)}),
    ({"ComparisonOperator": "LT", "AttributeValueList": [N(3)]}, "sk < :a", {":a": N(3)}),
    ({"ComparisonOperator": "LE", "AttributeValueList": [N(3)]}, "sk <= :a", {":a": N(3)}),
    ({"ComparisonOperator": "GT", "AttributeValueList": [N(8)]}, "sk > :a", {":a": N(8)}),
    ({"ComparisonOperator": "GE", "AttributeValueList": [N(8)]}, "sk >= :a", {":a": N(8)}),
    ({"ComparisonOperator": "BETWEEN", "AttributeValueList": [N(4), N(6)]},
     "sk BETWEEN :a AND :b", {":a": N(4), ":b": N(6)}),
]

# (QueryFilter, ConditionalOperator, FilterExpression, names, values): every
# comparison operator of the legacy form, and ConditionalOperator both ways.
FILTERS = [
    ({"n": {"ComparisonOperator": "EQ", "AttributeValueList": [N(40)]}}, None, "n = :f", {},
     {":f": N(40)}),
    ({"n": {"ComparisonOperator": "LT", "AttributeValueList": [N(40)]}}, None, "n < :f", {},
     {":f": N(40)}),
    ({"n": {"ComparisonOperator": "GE", "AttributeValueList": [N(40)]}}, None, "n >= :f", {},
     {":f": N(40)}),
    ({"opt": {"ComparisonOperator": "NOT_NULL"}}, None, "attribute_exists(opt)", {}, {}),
    ({"n": {"ComparisonOperator": "BETWEEN", "AttributeValueList": [N(25), N(75)]}}, None,
     "n BETWEEN :f AND :g", {}, {":f": N(25), ":g": N(75)}),
    ({"m": {"ComparisonOperator": "NOT_NULL"}, "x": {"ComparisonOperator": "EQ",
                                                     "AttributeValueList": [S("x3")]}}, "AND",
     "attribute_exists(m) AND x = :f", {}, {":f": S("x3")}),
    ({"n": {"ComparisonOperator": "GT", "AttributeValueList": [N(40)]}}, None, "n > :f", {},
     {":f": N(40)}),
    ({"opt": {"ComparisonOperator": "NULL"}}, None, "attribute_not_exists(opt)", {}, {}),
    ({"tags": {"ComparisonOperator": "CONTAINS", "AttributeValueList": [S("even")]}}, None,
     "contains(tags, :f)", {}, {":f": S("even")}),
    ({"tags": {"ComparisonOperator": "NOT_CONTAINS", "AttributeValueList": [S("even")]},
      "n": {"ComparisonOperator": "LE", "AttributeValueList": [N(50)]}}, "AND",
     "(attribute_exists(tags) AND NOT contains(tags, :f)) AND n <= :g", {},
     {":f": S("even"), ":g": N(50)}),
    ({"s": {"ComparisonOperator": "BEGINS_WITH", "AttributeValueList": [S("item-1")]},
      "n": {"ComparisonOperator": "IN", "AttributeValueList": [N(20), N(30)]}}, "OR",
     "begins_with(s, :f) OR n IN (:g, :h)", {}, {":f": S("item-1"), ":g": N(20), ":h": N(30)}),
    ({"opt": {"ComparisonOperator": "NE", "AttributeValueList": [S("yes")]}}, None,
     "#o <> :f", {"#o": "opt"}, {":f": S("yes")}),
]


class Query(Case):
    def both(self, sort=None, sort_text=None, values=None, qf=None, op=None, ftext=None,
             names=None, fvalues=None, attrs=None, **kw):
        """The same query in its legacy and its expression form: both answers."""
        legacy = dict(kw, TableName=RANGE, KeyConditions=dict(PK, **({"sk": sort} if sort else {})))
        if qf:
            legacy["QueryFilter"] = qf
            if op:
                legacy["ConditionalOperator"] = op
        if attrs:
            legacy["AttributesToGet"] = attrs
        modern = dict(kw, TableName=RANGE,
                      KeyConditionExpression="pk = :p" + (" AND " + sort_text if sort_text else ""))
        vals = dict({":p": S("r1")}, **(values or {}), **(fvalues or {}))
        nm = dict(names or {})
        if ftext:
            modern["FilterExpression"] = ftext
        if attrs:
            nm.update({"#p%d" % i: a for i, a in enumerate(attrs)})
            modern["ProjectionExpression"] = ", ".join("#p%d" % i for i in range(len(attrs)))
        modern["ExpressionAttributeValues"] = vals
        if nm:
            modern["ExpressionAttributeNames"] = nm
        return self.c.query(**legacy), self.c.query(**modern)

    def same(self, a, b):
        for k in ("Items", "Count", "ScannedCount", "LastEvaluatedKey"):
            self.assertEqual(a.get(k), b.get(k), k)

    def test_key_conditions_both_ways(self):
        for sort, text, values in SORT:
            with self.subTest(key=text):
                a, b = self.both(sort, text, values, ConsistentRead=True)
                self.same(a, b)
                self.assertGreater(a["Count"], 0)
        # begins_with on a string sort key (the LSI's, l = "L10" .. "L05").
        a = self.c.query(TableName=RANGE, IndexName="byL",
                         KeyConditions=dict(PK, l={"ComparisonOperator": "BEGINS_WITH",
                                                   "AttributeValueList": [S("L0")]}))
        b = self.c.query(TableName=RANGE, IndexName="byL",
                         KeyConditionExpression="pk = :p AND begins_with(l, :b)",
                         ExpressionAttributeValues={":p": S("r1"), ":b": S("L0")})
        self.same(a, b)
        self.assertEqual([i["l"]["S"] for i in a["Items"]], ["L05", "L06", "L07", "L08", "L09"])

    def test_filters_both_ways(self):
        for qf, op, text, names, values in FILTERS:
            with self.subTest(filter=text):
                a, b = self.both(qf=qf, op=op, ftext=text, names=names, fvalues=values)
                self.same(a, b)
                self.assertEqual(a["ScannedCount"], 10)

    def test_projection_both_ways(self):
        for attrs in (["n"], ["s", "opt", "nope"], ["pk", "sk"]):
            with self.subTest(attrs=attrs):
                a, b = self.both(attrs=attrs)
                self.same(a, b)
                want = [{k: v for k, v in read_item("r1", i).items() if k in attrs}
                        for i in range(1, 11)]
                self.assertEqual(a["Items"], want)

    def test_return_consumed_capacity(self):
        r = self.c.query(TableName=RANGE, KeyConditionExpression="pk = :p",
                         ExpressionAttributeValues={":p": S("r1")}, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(r["ConsumedCapacity"], {"TableName": RANGE, "CapacityUnits": 0.5})
        r = self.c.query(TableName=RANGE, KeyConditionExpression="pk = :p", ConsistentRead=True,
                         ExpressionAttributeValues={":p": S("r1")}, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(r["ConsumedCapacity"], {"TableName": RANGE, "CapacityUnits": 1.0})

    def test_select(self):
        a, b = self.both(Select="COUNT")
        self.same(a, b)
        self.assertNotIn("Items", a)
        self.assertEqual(a["Count"], 10)
        a, b = self.both(attrs=["n"], Select="SPECIFIC_ATTRIBUTES")
        self.same(a, b)
        r = self.c.query(TableName=RANGE, Select="ALL_ATTRIBUTES", KeyConditionExpression="pk = :p",
                         ExpressionAttributeValues={":p": S("r1")})
        self.assertEqual(r["Items"], [read_item("r1", i) for i in range(1, 11)])
        # ALL_PROJECTED_ATTRIBUTES on the GSI: its keys, the table's keys and x.
        r = self.c.query(TableName=RANGE, IndexName="byG", Select="ALL_PROJECTED_ATTRIBUTES",
                         KeyConditionExpression="g = :g AND sk <= :s",
                         ExpressionAttributeValues={":g": S("G1"), ":s": N(3)})
        self.assertEqual(sorted((i["pk"]["S"], i["sk"]["N"]) for i in r["Items"]),
                         [("r1", "1"), ("r1", "3"), ("r2", "1"), ("r2", "3")])
        for i in r["Items"]:
            self.assertEqual(set(i), {"pk", "sk", "g", "x"})

    def test_limit_order_and_pages(self):
        for forward in (True, False):
            with self.subTest(forward=forward):
                pages_legacy = []
                start_a = start_b = None
                while True:
                    extra_a = {"ExclusiveStartKey": start_a} if start_a else {}
                    extra_b = {"ExclusiveStartKey": start_b} if start_b else {}
                    a = self.c.query(TableName=RANGE, KeyConditions=PK, Limit=3,
                                     ScanIndexForward=forward, **extra_a)
                    b = self.c.query(TableName=RANGE, KeyConditionExpression="pk = :p",
                                     ExpressionAttributeValues={":p": S("r1")}, Limit=3,
                                     ScanIndexForward=forward, **extra_b)
                    self.same(a, b)
                    pages_legacy.append([int(i["sk"]["N"]) for i in a["Items"]])
                    start_a, start_b = a.get("LastEvaluatedKey"), b.get("LastEvaluatedKey")
                    if not start_a:
                        break
                flat = [x for p in pages_legacy for x in p]
                self.assertEqual(flat, list(range(1, 11)) if forward else list(range(10, 0, -1)))
                self.assertEqual([len(p) for p in pages_legacy], [3, 3, 3, 1])

    def test_limit_counts_what_is_read(self):
        # (Whether a page that ends exactly at Limit carries a LastEvaluatedKey
        # differs between DynamoDB and DynamoDB Local: not pinned here.)
        # A filter that keeps nothing still pages by what was read.
        c = self.c.query(TableName=RANGE, KeyConditionExpression="pk = :p",
                         FilterExpression="n > :big",
                         ExpressionAttributeValues={":p": S("r1"), ":big": N(1000)}, Limit=4)
        self.assertEqual((c["Count"], c["ScannedCount"]), (0, 4))
        self.assertEqual(c["LastEvaluatedKey"], self.key("r1", 4))

    def test_indexes(self):
        # LSI: sorted by l; items without l are not in it (sparse).
        r = self.c.query(TableName=RANGE, IndexName="byL", KeyConditionExpression="pk = :p",
                         ExpressionAttributeValues={":p": S("r2")}, ConsistentRead=True)
        self.assertEqual([i["sk"]["N"] for i in r["Items"]], ["6", "5", "4", "3", "2", "1"])
        self.assertEqual(r["Items"][0], read_item("r2", 6))
        # The index's LastEvaluatedKey names the index key and the table key.
        r = self.c.query(TableName=RANGE, IndexName="byG", KeyConditionExpression="g = :g",
                         ExpressionAttributeValues={":g": S("G0")}, Limit=1)
        self.assertEqual(set(r["LastEvaluatedKey"]), {"g", "pk", "sk"})

    def test_index_projection_and_consistency(self):
        # A local index may be read consistently and fetches what it lacks.
        r = self.c.query(TableName=RANGE, IndexName="byL", ConsistentRead=True,
                         KeyConditionExpression="pk = :p AND l = :l", ProjectionExpression="y",
                         ExpressionAttributeValues={":p": S("r1"), ":l": S("L10")})
        self.assertEqual(r["Items"], [{"y": S("y1")}])
        self.invalid(self.c.query, "One or more parameter values were invalid: Select type "
                     "ALL_ATTRIBUTES is not supported for global secondary index byG because "
                     "its projection type is not ALL", TableName=RANGE, IndexName="byG",
                     Select="ALL_ATTRIBUTES", KeyConditionExpression="g = :g",
                     ExpressionAttributeValues={":g": S("G1")})
        self.invalid(self.c.query, "Invalid KeyConditionExpression: Incorrect operand type for "
                     "operator or function; operator or function: begins_with, operand type: N",
                     TableName=RANGE, KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
                     ExpressionAttributeValues={":p": S("r1"), ":s": N(1)})
        self.invalid(self.c.query, "1 validation error detected: Cannot specify the "
                     "ProjectionExpression when choosing to get only the Count", TableName=RANGE,
                     Select="COUNT", ProjectionExpression="n", KeyConditionExpression="pk = :p",
                     ExpressionAttributeValues={":p": S("r1")})

    def test_table_and_index_not_found(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.query, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t,
                     KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("a")})
        self.invalid(self.c.query, "The table does not have the specified index: nope",
                     TableName=RANGE, IndexName="nope", KeyConditionExpression="pk = :p",
                     ExpressionAttributeValues={":p": S("a")})

    def test_key_condition_errors(self):
        q = self.c.query
        kw = {"TableName": RANGE}
        self.invalid(q, "Either the KeyConditions or KeyConditionExpression parameter must be "
                     "specified in the request.", **kw)
        self.invalid(q, "Query condition missed key schema element: pk",
                     KeyConditionExpression="sk = :a", ExpressionAttributeValues={":a": N(1)},
                     **kw)
        self.invalid(q, "Query condition missed key schema element: pk",
                     KeyConditions={"sk": {"ComparisonOperator": "EQ",
                                           "AttributeValueList": [N(1)]}}, **kw)
        # A non-key attribute in place of the sort key: the sort key is missed.
        self.invalid(q, "Query condition missed key schema element: sk",
                     KeyConditionExpression="pk = :p AND n = :a",
                     ExpressionAttributeValues={":p": S("a"), ":a": N(1)}, **kw)
        self.invalid(q, "Invalid operator used in KeyConditionExpression: OR",
                     KeyConditionExpression="pk = :p OR sk = :a",
                     ExpressionAttributeValues={":p": S("a"), ":a": N(1)}, **kw)
        self.invalid(q, "Invalid operator used in KeyConditionExpression: <>",
                     KeyConditionExpression="pk = :p AND sk <> :a",
                     ExpressionAttributeValues={":p": S("a"), ":a": N(1)}, **kw)
        self.invalid(q, "Query key condition not supported",
                     KeyConditionExpression="pk > :p",
                     ExpressionAttributeValues={":p": S("a")}, **kw)
        self.invalid(q, "One or more parameter values were invalid: Condition parameter type "
                     "does not match schema type",
                     KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": N(1)},
                     **kw)
        self.invalid(q, "Attempted conditional constraint is not an indexable operation",
                     KeyConditions=dict(PK, sk={"ComparisonOperator": "NE",
                                                "AttributeValueList": [N(1)]}), **kw)
        self.invalid(q, "Conditions can be of length 1 or 2 only",
                     KeyConditions=dict(PK, sk={"ComparisonOperator": "EQ",
                                                "AttributeValueList": [N(1)]},
                                        n={"ComparisonOperator": "EQ",
                                           "AttributeValueList": [N(1)]}), **kw)
        self.invalid(q, "Can not use both expression and non-expression parameters in the same "
                     "request: Non-expression parameters: {KeyConditions} Expression "
                     "parameters: {KeyConditionExpression}", KeyConditions=PK,
                     KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("a")},
                     **kw)
        self.invalid(q, "Invalid KeyConditionExpression: The BETWEEN operator requires upper "
                     "bound to be greater than or equal to lower bound; lower bound operand: "
                     "AttributeValue: {N:5}, upper bound operand: AttributeValue: {N:1}",
                     KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
                     ExpressionAttributeValues={":p": S("a"), ":a": N(5), ":b": N(1)}, **kw)

    def test_filter_and_projection_errors(self):
        q = self.c.query
        kw = {"TableName": RANGE, "KeyConditionExpression": "pk = :p"}
        self.invalid(q, "Filter Expression can only contain non-primary key attributes: "
                     "Primary key attribute: sk", FilterExpression="sk > :a",
                     ExpressionAttributeValues={":p": S("a"), ":a": N(1)}, **kw)
        self.invalid(q, "Can not use both expression and non-expression parameters in the same "
                     "request: Non-expression parameters: {QueryFilter} Expression parameters: "
                     "{KeyConditionExpression}",
                     QueryFilter={"n": {"ComparisonOperator": "NOT_NULL"}},
                     ExpressionAttributeValues={":p": S("a")}, **kw)
        self.invalid(q, "Value provided in ExpressionAttributeValues unused in expressions: "
                     "keys: {:u}", ExpressionAttributeValues={":p": S("a"), ":u": N(1)}, **kw)

    def test_select_errors(self):
        q = self.c.query
        kw = {"TableName": RANGE, "KeyConditionExpression": "pk = :p",
              "ExpressionAttributeValues": {":p": S("a")}}
        self.invalid(q, "ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an "
                     "IndexName", Select="ALL_PROJECTED_ATTRIBUTES", **kw)
        self.invalid(q, "1 validation error detected: Cannot specify the ProjectionExpression "
                     "when choosing to get ALL_ATTRIBUTES", Select="ALL_ATTRIBUTES",
                     ProjectionExpression="n", **kw)
        self.invalid(q, "Consistent reads are not supported on global secondary indexes",
                     TableName=RANGE, IndexName="byG", ConsistentRead=True,
                     KeyConditionExpression="g = :g", ExpressionAttributeValues={":g": S("a")})
        self.invalid(self.raw.query, constraint("'0'", "limit",
                                                "have value greater than or equal to 1"),
                     Limit=0, **kw)
        self.invalid(self.raw.query, constraint("'ALL'", "select",
                                                "satisfy enum value set: [SPECIFIC_ATTRIBUTES, "
                                                "COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES]"),
                     Select="ALL", **kw)

    def test_exclusive_start_key_errors(self):
        kw = {"TableName": RANGE, "KeyConditionExpression": "pk = :p",
              "ExpressionAttributeValues": {":p": S("r1")}}
        self.invalid(self.c.query, re.compile(r"^The provided starting key is invalid"),
                     ExclusiveStartKey={"pk": S("r1")}, **kw)
        self.invalid(self.c.query, "The provided starting key is outside query boundaries "
                     "based on provided conditions",
                     ExclusiveStartKey={"pk": S("r2"), "sk": N(1)}, **kw)


if __name__ == "__main__":
    main([__file__])
