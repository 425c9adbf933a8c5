"""GetItem: TableName, Key, ConsistentRead, ProjectionExpression,
ExpressionAttributeNames, AttributesToGet (legacy), ReturnConsumedCapacity;
errors ResourceNotFoundException and ValidationException.  (Consumed
capacity figures are test_http.py's test_consumed_capacity.)"""
import re

from conformance import HASH, RANGE, Case, N, S, constraint, main, read_item, uid

NOT_SCHEMA = "The provided key element does not match the schema"


class GetItem(Case):
    def test_item_and_absent_item(self):
        r = self.c.get_item(TableName=RANGE, Key=self.key("r1", 3))
        self.assertEqual(r["Item"], read_item("r1", 3))
        r = self.c.get_item(TableName=RANGE, Key=self.key("r1", 99), ConsistentRead=True)
        self.assertNotIn("Item", r)
        for cr in (True, False):
            r = self.c.get_item(TableName=RANGE, Key=self.key("r2", 4), ConsistentRead=cr)
            self.assertEqual(r["Item"], read_item("r2", 4))

    def test_projection_legacy_and_expression_agree(self):
        for attrs in (["n"], ["s", "opt"], ["pk", "tags", "nope"], ["nope"]):
            with self.subTest(attrs=attrs):
                legacy = self.c.get_item(TableName=RANGE, Key=self.key("r1", 5),
                                         AttributesToGet=attrs)
                names = {"#a%d" % i: a for i, a in enumerate(attrs)}
                modern = self.c.get_item(TableName=RANGE, Key=self.key("r1", 5),
                                         ProjectionExpression=", ".join(names),
                                         ExpressionAttributeNames=names)
                self.assertEqual(legacy.get("Item"), modern.get("Item"))
                want = {a: v for a, v in read_item("r1", 5).items() if a in attrs}
                self.assertEqual(legacy["Item"], want)
        # Nothing projected exists on a present item: an empty Item (GetItem
        # and BatchGetItem answer {}; TransactGetItems leaves Item out).
        r = self.c.get_item(TableName=RANGE, Key=self.key("r1", 5), ProjectionExpression="nope")
        self.assertEqual(r["Item"], {})

    def test_projection_document_paths(self):
        r = self.c.get_item(TableName=RANGE, Key=self.key("r1", 2),
                            ProjectionExpression="m.a, m.l[1], #t, m.l[7]",
                            ExpressionAttributeNames={"#t": "tags"})
        self.assertEqual(r["Item"], {"m": {"M": {"a": N(2), "l": {"L": [N(2)]}}},
                                     "tags": read_item("r1", 2)["tags"]})

    def test_return_consumed_capacity(self):
        for mode, want in (("NONE", None), ("TOTAL", {"TableName": RANGE, "CapacityUnits": 0.5}),
                           ("INDEXES", {"TableName": RANGE, "CapacityUnits": 0.5,
                                        "Table": {"CapacityUnits": 0.5}})):
            with self.subTest(mode=mode):
                r = self.c.get_item(TableName=RANGE, Key=self.key("r1", 1),
                                    ReturnConsumedCapacity=mode)
                self.assertEqual(r.get("ConsumedCapacity"), want)

    def test_table_not_found(self):
        # The wording of DynamoDB's error-handling guide.
        t = "conf-absent-" + uid()
        self.refused(self.c.get_item, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t,
                     Key=self.key("a"))

    def test_key_not_matching_schema(self):
        for key in ({"pk": S("a")},                                  # sort key missing
                    {"pk": S("a"), "sk": N(1), "x": S("1")},         # one too many
                    {"pk": N(1), "sk": N(1)},                        # wrong type
                    {"sk": N(1), "other": S("a")}):                  # wrong name
            with self.subTest(key=key):
                self.invalid(self.c.get_item, NOT_SCHEMA, TableName=RANGE, Key=key)
        self.invalid(self.c.get_item, NOT_SCHEMA, TableName=HASH, Key={})

    def test_empty_string_key(self):
        self.invalid(self.c.get_item,
                     "One or more parameter values are not valid. The AttributeValue for a key "
                     "attribute cannot contain an empty string value. Key: pk",
                     TableName=HASH, Key={"pk": S("")})

    def test_legacy_and_expression_mixed(self):
        self.invalid(self.c.get_item,
                     "Can not use both expression and non-expression parameters in the same "
                     "request: Non-expression parameters: {AttributesToGet} Expression "
                     "parameters: {ProjectionExpression}",
                     TableName=RANGE, Key=self.key("r1", 1), AttributesToGet=["n"],
                     ProjectionExpression="s")

    def test_expression_attribute_names(self):
        k = self.key("r1", 1)
        self.invalid(self.c.get_item,
                     "Value provided in ExpressionAttributeNames unused in expressions: "
                     "keys: {#u}", TableName=RANGE, Key=k, ProjectionExpression="#n",
                     ExpressionAttributeNames={"#n": "n", "#u": "s"})
        self.invalid(self.c.get_item,
                     "ExpressionAttributeNames can only be specified when using expressions",
                     TableName=RANGE, Key=k, ExpressionAttributeNames={"#n": "n"})
        self.invalid(self.c.get_item,
                     "Invalid ProjectionExpression: An expression attribute name used in the "
                     "document path is not defined; attribute name: #x",
                     TableName=RANGE, Key=k, ProjectionExpression="#x")
        self.invalid(self.raw.get_item, "ExpressionAttributeNames must not be empty",
                     TableName=RANGE, Key=k, ProjectionExpression="n",
                     ExpressionAttributeNames={})

    def test_projection_errors(self):
        k = self.key("r1", 1)
        self.invalid(self.c.get_item,
                     "Invalid ProjectionExpression: Attribute name is a reserved keyword; "
                     "reserved keyword: name", TableName=RANGE, Key=k,
                     ProjectionExpression="name")
        self.invalid(self.c.get_item,
                     "Invalid ProjectionExpression: Two document paths overlap with each other; "
                     "must remove or rewrite one of these paths; path one: [m], path two: [m, a]",
                     TableName=RANGE, Key=k, ProjectionExpression="m, m.a")
        self.invalid(self.c.get_item,
                     "Invalid ProjectionExpression: Syntax error; token: \"<EOF>\", near: \",\"",
                     TableName=RANGE, Key=k, ProjectionExpression="n,")
        self.invalid(self.raw.get_item,
                     "Invalid ProjectionExpression: The expression can not be empty;",
                     TableName=RANGE, Key=k, ProjectionExpression="")

    def test_attributes_to_get_duplicates(self):
        self.invalid(self.c.get_item,
                     "One or more parameter values were invalid: Duplicate value in attribute "
                     "name: n", TableName=RANGE, Key=self.key("r1", 1),
                     AttributesToGet=["n", "n"])

    def test_parameter_constraints(self):
        k = self.key("a")
        # botocore 1.29's model constrains TableName to 3..255; today's takes an
        # ARN (1..1024) and leaves the length to the service: either wording.
        self.invalid(self.raw.get_item, re.compile(
            "^(%s|TableName must be at least 3 characters long and at most 255 characters "
            "long)$" % re.escape(constraint("'ab'", "tableName",
                                            "have length greater than or equal to 3"))),
            TableName="ab", Key=k)
        self.invalid(self.raw.get_item,
                     constraint("'a b c'", "tableName",
                                "satisfy regular expression pattern: [a-zA-Z0-9_.-]+"),
                     TableName="a b c", Key=k)
        self.invalid(self.raw.get_item,
                     constraint("null", "key", "not be null"), TableName=HASH)
        self.invalid(self.raw.get_item,
                     constraint("'BAD'", "returnConsumedCapacity",
                                "satisfy enum value set: [INDEXES, TOTAL, NONE]"),
                     TableName=HASH, Key=k, ReturnConsumedCapacity="BAD")
        self.refused(self.raw.get_item, "SerializationException", re.compile("Boolean"),
                     TableName=HASH, Key=k, ConsistentRead=[1])


if __name__ == "__main__":
    main([__file__])
