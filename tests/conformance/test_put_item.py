"""PutItem: TableName, Item, ConditionExpression, Expected (legacy) with
ConditionalOperator, ExpressionAttributeNames/Values, ReturnValues,
ReturnValuesOnConditionCheckFailure, ReturnConsumedCapacity,
ReturnItemCollectionMetrics; errors ConditionalCheckFailedException,
ResourceNotFoundException, ValidationException (the item's keys and values,
its size, the expression parameters)."""
import re

from conformance import HASH, NUMKEY, RANGE, Case, N, S, api, constraint, gap, main, uid


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

    @gap("ReturnItemCollectionMetrics=SIZE on a table with a local secondary index: "
         "DynamoDB answers ItemCollectionMetrics (ItemCollectionKey, SizeEstimateRangeGB); "
         "Shoal accepts the parameter and answers nothing")
    def test_item_collection_metrics(self):
        # A table with a local secondary index reports its item collection.
        k = uid()
        r = self.c.put_item(TableName=RANGE, Item={"pk": S(k), "sk": N(1), "l": S("a")},
                            ReturnItemCollectionMetrics="SIZE")
        m = r["ItemCollectionMetrics"]
        self.assertEqual(m["ItemCollectionKey"], {"pk": S(k)})
        self.assertEqual(len(m["SizeEstimateRangeGB"]), 2)
        self.assertLessEqual(m["SizeEstimateRangeGB"][0], m["SizeEstimateRangeGB"][1])
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

    def test_required_members(self):
        self.invalid(self.raw.put_item, constraint("null", "item", "not be null"),
                     TableName=HASH)
        self.invalid(self.raw.put_item, constraint("null", "tableName", "not be null"),
                     Item={"pk": S("a")})


if __name__ == "__main__":
    main([__file__])
