"""PutItem: TableName, Item, ConditionExpression, Expected (legacy) with
ConditionalOperator, ExpressionAttributeNames/Values, ReturnValues,
ReturnValuesOnConditionCheckFailure, ReturnConsumedCapacity,
ReturnItemCollectionMetrics; errors ConditionalCheckFailedException,
ResourceNotFoundException, ValidationException (the item's keys and values,
its size, the expression parameters)."""
import re
from decimal import Decimal

from conformance import HASH, NUMKEY, RANGE, Case, N, S, api, constraint, main, uid


# (Expected, ConditionalOperator or None, ConditionExpression, names, values):
# each pair says the same thing; run against an item {pk, v: 5, s: "abc"}.
CONDITIONS = [
    ({"v": {"Value": N(5)}}, None, "v = :a", {}, {":a": N(5)}),
    ({"v": {"Value": N(6)}}, None, "v = :a", {}, {":a": N(6)}),
    ({"v": {"Exists": True, "Value": N(5)}}, None, "v = :a", {}, {":a": N(5)}),
    ({"v": {"Exists": False}}, None, "attribute_not_exists(v)", {}, {}),
    ({"w": {"Exists": False}}, None, "attribute_not_exists(w)", {}, {}),
    ({"v": {"ComparisonOperator": "GT", "AttributeValueList": [N(4)]}}, None, "v > :a", {},
     {":a": N(4)}),
    ({"v": {"ComparisonOperator": "BETWEEN", "AttributeValueList": [N(6), N(9)]}}, None,
     "v BETWEEN :a AND :b", {}, {":a": N(6), ":b": N(9)}),
    ({"s": {"ComparisonOperator": "BEGINS_WITH", "AttributeValueList": [S("ab")]}}, None,
     "begins_with(s, :a)", {}, {":a": S("ab")}),
    ({"s": {"ComparisonOperator": "NOT_NULL"}, "w": {"ComparisonOperator": "NULL"}}, "AND",
     "attribute_exists(s) AND attribute_not_exists(w)", {}, {}),
    ({"v": {"ComparisonOperator": "EQ", "AttributeValueList": [N(1)]},
      "s": {"ComparisonOperator": "EQ", "AttributeValueList": [S("abc")]}}, "OR",
     "v = :a OR s = :b", {}, {":a": N(1), ":b": S("abc")}),
    ({"v": {"ComparisonOperator": "IN", "AttributeValueList": [N(1), N(5)]}}, None,
     "#v IN (:a, :b)", {"#v": "v"}, {":a": N(1), ":b": N(5)}),
    ({"s": {"ComparisonOperator": "LT", "AttributeValueList": [S("abd")]},
      "v": {"ComparisonOperator": "GE", "AttributeValueList": [N(5)]}}, "AND",
     "s < :a AND v >= :b", {}, {":a": S("abd"), ":b": N(5)}),
    # Comparisons across types are false, never an error.
    ({"v": {"ComparisonOperator": "LT", "AttributeValueList": [S("9")]}}, None, "v < :a", {},
     {":a": S("9")}),
    ({"s": {"ComparisonOperator": "NE", "AttributeValueList": [N(1)]}}, None, "s <> :a", {},
     {":a": N(1)}),
]

# Expression-only functions and forms, with their outcome on {pk, v: 5, s: "abc"}.
FUNCTIONS = [
    ("attribute_type(v, :t)", {":t": S("N")}, True),
    ("attribute_type(s, :t)", {":t": S("N")}, False),
    ("size(s) = :n", {":n": N(3)}, True),
    ("size(s) > :n", {":n": N(3)}, False),
    ("contains(s, :x)", {":x": S("bc")}, True),
    ("NOT (v = :n)", {":n": N(5)}, False),
    ("v BETWEEN :a AND :b AND NOT begins_with(s, :p)",
     {":a": N(1), ":b": N(9), ":p": S("x")}, True),
    ("(v < :a OR v > :b) AND attribute_exists(s)", {":a": N(1), ":b": N(4)}, True),
    ("v IN (:a, :b, :c)", {":a": N(1), ":b": N(2), ":c": N(3)}, False),
]


class PutItem(Case):
    def test_put_and_return_values(self):
        k = uid()
        item = {"pk": S(k), "v": N(1)}
        r = self.c.put_item(TableName=HASH, Item=item, ReturnValues="ALL_OLD")
        self.assertNotIn("Attributes", r)  # nothing was there
        r = self.c.put_item(TableName=HASH, Item={"pk": S(k), "v": N(2)}, ReturnValues="ALL_OLD")
        self.assertEqual(r["Attributes"], item)
        r = self.c.put_item(TableName=HASH, Item={"pk": S(k)}, ReturnValues="NONE")
        self.assertNotIn("Attributes", r)
        self.assertEqual(self.c.get_item(TableName=HASH, Key={"pk": S(k)},
                                         ConsistentRead=True)["Item"], {"pk": S(k)})

    def test_every_type_round_trips(self):
        k = uid()
        item = {"pk": S(k), "s": S("\u00e9t\u00e9 \U0001f600"), "n": N("-0.000123"),
                "b": {"B": bytes(range(256))}, "t": {"BOOL": True}, "f": {"BOOL": False},
                "z": {"NULL": True}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.5"]},
                "bs": {"BS": [b"\x00", b"\xff"]}, "l": {"L": [S("x"), N(1), {"NULL": True}]},
                "m": {"M": {"inner": {"M": {"deep": {"L": [{"SS": ["q"]}]}}}}},
                "el": {"L": []}, "em": {"M": {}}, "es": S(""), "eb": {"B": b""}}
        self.c.put_item(TableName=HASH, Item=item)
        got = self.c.get_item(TableName=HASH, Key={"pk": S(k)}, ConsistentRead=True)["Item"]
        for a in ("ss", "ns", "bs"):  # sets have no order
            t = next(iter(item[a]))
            got[a] = {t: sorted(got[a][t])}
        self.assertEqual(got, item)

    def test_numbers_are_canonical(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "a": N("01.500"), "b": N("-0"),
                                              "c": N("1E+2"), "d": N("0.00012300"),
                                              "e": N("9" * 38), "f": N("1E-130"),
                                              "g": N("9." + "9" * 37 + "E+125")})
        got = self.c.get_item(TableName=HASH, Key={"pk": S(k)}, ConsistentRead=True)["Item"]
        self.assertEqual({a: got[a]["N"] for a in "abcde"},
                         {"a": "1.5", "b": "0", "c": "100", "d": "0.000123", "e": "9" * 38})
        # The extremes keep their value (their spelling is not pinned here).
        self.assertEqual(Decimal(got["f"]["N"]), Decimal("1E-130"))
        self.assertEqual(Decimal(got["g"]["N"]),
                         Decimal("9.9999999999999999999999999999999999999E+125"))

    def test_return_consumed_capacity(self):
        r = self.c.put_item(TableName=HASH, Item={"pk": S(uid())}, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(r["ConsumedCapacity"], {"TableName": HASH, "CapacityUnits": 1.0})
        r = self.c.put_item(TableName=HASH, Item={"pk": S(uid())}, ReturnConsumedCapacity="INDEXES")
        self.assertEqual(r["ConsumedCapacity"], {"TableName": HASH, "CapacityUnits": 1.0,
                                                 "Table": {"CapacityUnits": 1.0}})
        self.assertNotIn("ConsumedCapacity",
                         self.c.put_item(TableName=HASH, Item={"pk": S(uid())},
                                         ReturnConsumedCapacity="NONE"))

    def test_return_values_refused(self):
        for rv in ("ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"):
            with self.subTest(rv=rv):
                self.invalid(self.c.put_item, "ReturnValues can only be ALL_OLD or NONE",
                             TableName=HASH, Item={"pk": S(uid())}, ReturnValues=rv)
        self.invalid(self.raw.put_item,
                     constraint("'BAD'", "returnValues", "satisfy enum value set: [ALL_NEW, "
                                "UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]"),
                     TableName=HASH, Item={"pk": S(uid())}, ReturnValues="BAD")

    def test_expected_and_condition_expression_agree(self):
        for expected, op, text, names, values in CONDITIONS:
            with self.subTest(condition=text):
                outcomes = []
                for form in ("legacy", "expression"):
                    k = uid()
                    base = {"pk": S(k), "v": N(5), "s": S("abc")}
                    self.c.put_item(TableName=HASH, Item=base)
                    kw = {"TableName": HASH, "Item": {"pk": S(k), "new": S(form)}}
                    if form == "legacy":
                        kw["Expected"] = expected
                        if op:
                            kw["ConditionalOperator"] = op
                    else:
                        kw["ConditionExpression"] = text
                        if names:
                            kw["ExpressionAttributeNames"] = names
                        if values:
                            kw["ExpressionAttributeValues"] = values
                    try:
                        self.c.put_item(**kw)
                        ok = True
                    except self.c.exceptions.ConditionalCheckFailedException as e:
                        self.assertEqual(e.response["Error"]["Message"],
                                         "The conditional request failed")
                        ok = False
                    got = self.c.get_item(TableName=HASH, Key={"pk": S(k)},
                                          ConsistentRead=True)["Item"]
                    self.assertEqual(got, kw["Item"] if ok else base)
                    outcomes.append(ok)
                self.assertEqual(outcomes[0], outcomes[1])

    def test_condition_functions(self):
        for text, values, want in FUNCTIONS:
            with self.subTest(condition=text):
                k = uid()
                self.c.put_item(TableName=HASH, Item={"pk": S(k), "v": N(5), "s": S("abc")})
                try:
                    self.c.put_item(TableName=HASH, Item={"pk": S(k)}, ConditionExpression=text,
                                    ExpressionAttributeValues=values)
                    ok = True
                except self.c.exceptions.ConditionalCheckFailedException:
                    ok = False
                self.assertEqual(ok, want)
        self.invalid(self.c.put_item, "Invalid ConditionExpression: Invalid attribute type name "
                     "found; type: X, valid types: {B,NULL,SS,BOOL,L,BS,N,NS,S,M}",
                     TableName=HASH, Item={"pk": S(uid())},
                     ConditionExpression="attribute_type(v, :t)",
                     ExpressionAttributeValues={":t": S("X")})
        self.invalid(self.c.put_item, "Invalid ConditionExpression: The function is not allowed "
                     "to be used this way in an expression; function: size",
                     TableName=HASH, Item={"pk": S(uid())}, ConditionExpression="size(v)")
        self.invalid(self.c.put_item, "Invalid ConditionExpression: Incorrect number of operands "
                     "for operator or function; operator or function: begins_with, number of "
                     "operands: 1", TableName=HASH, Item={"pk": S(uid())},
                     ConditionExpression="begins_with(v)")
        self.invalid(self.c.put_item, "Invalid ConditionExpression: The first operand must be "
                     "distinct from the remaining operands for this operator or function; "
                     "operator: =, first operand: [v]", TableName=HASH, Item={"pk": S(uid())},
                     ConditionExpression="v = v")

    def test_condition_on_absent_item(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k)},
                        ConditionExpression="attribute_not_exists(pk)")
        self.refused(self.c.put_item, "ConditionalCheckFailedException",
                     "The conditional request failed", TableName=HASH, Item={"pk": S(k)},
                     ConditionExpression="attribute_not_exists(pk)")
        self.refused(self.c.put_item, "ConditionalCheckFailedException",
                     "The conditional request failed", TableName=HASH, Item={"pk": S(k)},
                     Expected={"pk": {"Exists": False}})

    def test_return_values_on_condition_check_failure(self):
        # Not in Debian's botocore 1.29 model of PutItem: a raw request.
        k = uid()
        item = {"pk": S(k), "v": N(1)}
        self.c.put_item(TableName=HASH, Item=item)
        body = {"TableName": HASH, "Item": {"pk": S(k)}, "ConditionExpression": "v = :x",
                "ExpressionAttributeValues": {":x": N(2)}}
        for rv, want in (("ALL_OLD", item), ("NONE", None)):
            with self.subTest(rv=rv):
                st, d = api("PutItem", dict(body, ReturnValuesOnConditionCheckFailure=rv))
                self.assertEqual((st, d["__type"].split("#")[-1], d["message"]),
                                 (400, "ConditionalCheckFailedException",
                                  "The conditional request failed"))
                self.assertEqual(d.get("Item"), want)
        self.api_refused("PutItem", dict(body, ReturnValuesOnConditionCheckFailure="ALL_NEW"),
                         "ValidationException",
                         constraint("'ALL_NEW'", "returnValuesOnConditionCheckFailure",
                                    "satisfy enum value set: [ALL_OLD, NONE]"))

    def test_item_collection_metrics(self):
        # A table with a local secondary index reports its item collection.
        k = uid()
        r = self.c.put_item(TableName=RANGE, Item={"pk": S(k), "sk": N(1), "l": S("a")},
                            ReturnItemCollectionMetrics="SIZE")
        m = r["ItemCollectionMetrics"]
        self.assertEqual(m["ItemCollectionKey"], {"pk": S(k)})
        self.assertEqual(len(m["SizeEstimateRangeGB"]), 2)
        self.assertLessEqual(m["SizeEstimateRangeGB"][0], m["SizeEstimateRangeGB"][1])
        # A small collection: DynamoDB's estimate is [0.0, 1.0].
        self.assertEqual(m["SizeEstimateRangeGB"], [0.0, 1.0])
        # NONE (and no parameter) asks for nothing.
        r = self.c.put_item(TableName=RANGE, Item={"pk": S(k), "sk": N(2)},
                            ReturnItemCollectionMetrics="NONE")
        self.assertNotIn("ItemCollectionMetrics", r)
        # Without one there is nothing to report.
        r = self.c.put_item(TableName=HASH, Item={"pk": S(uid())},
                            ReturnItemCollectionMetrics="SIZE")
        self.assertNotIn("ItemCollectionMetrics", r)

    def test_table_not_found(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.put_item, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t,
                     Item={"pk": S("a")})

    def test_key_errors(self):
        self.invalid(self.c.put_item,
                     "One or more parameter values were invalid: Missing the key pk in the item",
                     TableName=HASH, Item={"v": S("a")})
        self.invalid(self.c.put_item,
                     "One or more parameter values were invalid: Missing the key sk in the item",
                     TableName=RANGE, Item={"pk": S("a")})
        self.invalid(self.c.put_item,
                     "One or more parameter values were invalid: Type mismatch for key pk "
                     "expected: S actual: N", TableName=HASH, Item={"pk": N(1)})
        self.invalid(self.c.put_item,
                     "One or more parameter values were invalid: Type mismatch for key sk "
                     "expected: B actual: S", TableName=NUMKEY,
                     Item={"pk": N(1), "sk": S("x")})
        self.invalid(self.c.put_item,
                     "One or more parameter values are not valid. The AttributeValue for a key "
                     "attribute cannot contain an empty string value. Key: pk",
                     TableName=HASH, Item={"pk": S("")})
        self.invalid(self.c.put_item,
                     "One or more parameter values are not valid. The AttributeValue for a key "
                     "attribute cannot contain an empty binary value. Key: sk",
                     TableName=NUMKEY, Item={"pk": N(1), "sk": {"B": b""}})
        self.invalid(self.c.put_item,
                     # sic: DynamoDB's message has no space before 2048.
                     "One or more parameter values were invalid: Size of hashkey has exceeded "
                     "the maximum size limit of2048 bytes",
                     TableName=HASH, Item={"pk": S("x" * 2049)})
        self.invalid(self.c.put_item,
                     "One or more parameter values were invalid: Aggregated size of all range "
                     "keys has exceeded the size limit of 1024 bytes",
                     TableName=NUMKEY, Item={"pk": N(1), "sk": {"B": b"x" * 1025}})

    def test_value_errors(self):
        k = S(uid())
        cases = [
            ({"ss": {"SS": []}}, "One or more parameter values were invalid: An string set  "
                                 "may not be empty"),
            ({"ns": {"NS": []}}, "One or more parameter values were invalid: An number set  "
                                 "may not be empty"),
            ({"bs": {"BS": []}}, "One or more parameter values were invalid: Binary sets "
                                 "should not be empty"),
            ({"n": {"N": "1e126"}}, "Number overflow. Attempting to store a number with "
                                   "magnitude larger than supported range"),
            ({"n": {"N": "1e-131"}}, "Number underflow. Attempting to store a number with "
                                    "magnitude smaller than supported range"),
            ({"n": {"N": "1" * 39}}, "Attempting to store more than 38 significant digits "
                                    "in a Number"),
            ({"n": {"N": "abc"}}, "The parameter cannot be converted to a numeric value: abc"),
            ({"z": {"NULL": False}}, "One or more parameter values were invalid: Null "
                                     "attribute value types must have the value of true"),
            ({"e": {}}, "Supplied AttributeValue is empty, must contain exactly one of the "
                        "supported datatypes"),
            ({"two": {"S": "a", "N": "1"}}, "Supplied AttributeValue has more than one "
                                            "datatypes set, must contain exactly one of the "
                                            "supported datatypes"),
        ]
        for extra, msg in cases:
            with self.subTest(value=extra):
                self.invalid(self.raw.put_item, msg, TableName=HASH, Item={"pk": k, **extra})
        # Sets with duplicates: DynamoDB names the input collection.
        self.invalid(self.raw.put_item, re.compile(
            r"^One or more parameter values were invalid: Input collection .*contains "
            r"duplicates\.$"), TableName=HASH, Item={"pk": k, "ss": {"SS": ["a", "a"]}})
        # Empty strings and binaries outside keys are values like any other.
        self.c.put_item(TableName=HASH, Item={"pk": k, "e": S(""), "b": {"B": b""}})

    def test_item_size(self):
        self.invalid(self.c.put_item, "Item size has exceeded the maximum allowed size",
                     TableName=HASH, Item={"pk": S(uid()), "big": S("x" * (400 * 1024))})
        # Exactly at the limit (name and value bytes count) is accepted.
        k = uid()
        room = 400 * 1024 - len("pk") - len(k) - len("big")
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "big": S("x" * room)})

    def test_expression_parameters(self):
        kw = {"TableName": HASH, "Item": {"pk": S(uid())}}
        self.invalid(self.c.put_item,
                     "Can not use both expression and non-expression parameters in the same "
                     "request: Non-expression parameters: {Expected} Expression parameters: "
                     "{ConditionExpression}", Expected={"v": {"Exists": False}},
                     ConditionExpression="attribute_not_exists(v)", **kw)
        self.invalid(self.c.put_item,
                     "Value provided in ExpressionAttributeValues unused in expressions: "
                     "keys: {:u}", ConditionExpression="v = :a",
                     ExpressionAttributeValues={":a": N(1), ":u": N(2)}, **kw)
        self.invalid(self.c.put_item,
                     "Invalid ConditionExpression: An expression attribute value used in "
                     "expression is not defined; attribute value: :b",
                     ConditionExpression="v = :b", ExpressionAttributeValues={":a": N(1)}, **kw)
        self.invalid(self.c.put_item,
                     "ExpressionAttributeValues can only be specified when using expressions: "
                     "ConditionExpression is null", ExpressionAttributeValues={":a": N(1)}, **kw)
        self.invalid(self.raw.put_item, "ExpressionAttributeValues must not be empty",
                     ConditionExpression="attribute_exists(v)", ExpressionAttributeValues={},
                     **kw)
        self.invalid(self.c.put_item,
                     "ConditionalOperator cannot be used without Filter or Expected",
                     ConditionalOperator="AND", **kw)
        self.invalid(self.c.put_item,
                     "Invalid ConditionExpression: The expression can not be empty;",
                     ConditionExpression="", **kw)
        self.invalid(self.c.put_item, re.compile(
            r"^Invalid ConditionExpression: Syntax error; token: "), ConditionExpression="v = ",
            **kw)
        self.invalid(self.c.put_item,
                     "Invalid ConditionExpression: Invalid function name; function: nope",
                     ConditionExpression="nope(v)", **kw)

    def test_expression_attribute_keys(self):
        kw = {"TableName": HASH, "Item": {"pk": S(uid())}, "ConditionExpression": "#a <> :v"}
        self.invalid(self.c.put_item, "ExpressionAttributeNames contains invalid key: Syntax "
                     "error; key: \"a\"", ExpressionAttributeNames={"a": "x", "#a": "x"},
                     ExpressionAttributeValues={":v": N(1)}, **kw)
        self.invalid(self.c.put_item, "ExpressionAttributeValues contains invalid key: Syntax "
                     "error; key: \"v\"", ExpressionAttributeNames={"#a": "x"},
                     ExpressionAttributeValues={"v": N(1), ":v": N(1)}, **kw)
        for value, why in (
                ({}, "Supplied AttributeValue is empty, must contain exactly one of the "
                     "supported datatypes"),
                ({"S": "a", "N": "1"}, "Supplied AttributeValue has more than one datatypes "
                                       "set, must contain exactly one of the supported "
                                       "datatypes"),
                ({"NULL": False}, "One or more parameter values were invalid: Null attribute "
                                  "value types must have the value of true"),
                ({"SS": []}, "One or more parameter values were invalid: An string set  may "
                             "not be empty"),
                ({"N": "x"}, "The parameter cannot be converted to a numeric value: x")):
            with self.subTest(value=value):
                self.invalid(self.raw.put_item, "ExpressionAttributeValues contains invalid "
                             "value: %s for key :v" % why,
                             ExpressionAttributeNames={"#a": "x"},
                             ExpressionAttributeValues={":v": value}, **kw)
        self.invalid(self.raw.put_item, "ExpressionAttributeNames contains invalid value: Empty "
                     "attribute name for key #a", ExpressionAttributeNames={"#a": ""},
                     ExpressionAttributeValues={":v": N(1)}, **kw)

    def test_number_keys_compare_by_value(self):
        k = {"pk": N("1.50"), "sk": {"B": b"\x00"}}
        self.c.put_item(TableName=NUMKEY, Item=dict(k, v=S("first")))
        self.c.put_item(TableName=NUMKEY, Item={"pk": N("15E-1"), "sk": {"B": b"\x00"},
                                                "v": S("second")})
        got = self.c.get_item(TableName=NUMKEY, Key={"pk": N("1.5"), "sk": {"B": b"\x00"}},
                              ConsistentRead=True)["Item"]
        self.assertEqual(got, {"pk": N("1.5"), "sk": {"B": b"\x00"}, "v": S("second")})

    def test_required_members(self):
        self.invalid(self.raw.put_item, constraint("null", "item", "not be null"),
                     TableName=HASH)
        self.invalid(self.raw.put_item, constraint("null", "tableName", "not be null"),
                     Item={"pk": S("a")})


if __name__ == "__main__":
    main([__file__])
