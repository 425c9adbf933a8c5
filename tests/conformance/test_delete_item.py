"""DeleteItem: TableName, Key, ConditionExpression and Expected (legacy) with
ConditionalOperator, ExpressionAttributeNames/Values, ReturnValues,
ReturnValuesOnConditionCheckFailure; errors ConditionalCheckFailedException,
ResourceNotFoundException, ValidationException."""
from conformance import HASH, RANGE, Case, N, S, api, constraint, main, uid

# (Expected, ConditionalOperator, ConditionExpression, values) against {pk, v: 1, w: "x"}.
CONDITIONS = [
    ({"v": {"Value": N(1)}}, None, "v = :a", {":a": N(1)}),
    ({"v": {"Value": N(2)}}, None, "v = :a", {":a": N(2)}),
    ({"v": {"Exists": False}}, None, "attribute_not_exists(v)", {}),
    ({"v": {"ComparisonOperator": "NE", "AttributeValueList": [N(1)]}}, None, "v <> :a",
     {":a": N(1)}),
    ({"w": {"ComparisonOperator": "CONTAINS", "AttributeValueList": [S("x")]},
      "v": {"ComparisonOperator": "LT", "AttributeValueList": [N(0)]}}, "AND",
     "contains(w, :a) AND v < :b", {":a": S("x"), ":b": N(0)}),
    ({"w": {"ComparisonOperator": "NOT_CONTAINS", "AttributeValueList": [S("q")]},
      "v": {"ComparisonOperator": "LT", "AttributeValueList": [N(0)]}}, "OR",
     "(attribute_exists(w) AND NOT contains(w, :a)) OR v < :b", {":a": S("q"), ":b": N(0)}),
]


class DeleteItem(Case):
    def exists(self, k):
        return "Item" in self.c.get_item(TableName=HASH, Key={"pk": S(k)}, ConsistentRead=True)

    def test_delete_and_return_values(self):
        k = uid()
        item = {"pk": S(k), "v": N(1)}
        self.c.put_item(TableName=HASH, Item=item)
        r = self.c.delete_item(TableName=HASH, Key={"pk": S(k)}, ReturnValues="ALL_OLD")
        self.assertEqual(r["Attributes"], item)
        self.assertFalse(self.exists(k))
        # Deleting what is not there is no error, and returns nothing.
        r = self.c.delete_item(TableName=HASH, Key={"pk": S(k)}, ReturnValues="ALL_OLD")
        self.assertNotIn("Attributes", r)
        for rv in ("ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"):
            with self.subTest(rv=rv):
                self.invalid(self.c.delete_item, "ReturnValues can only be ALL_OLD or NONE",
                             TableName=HASH, Key={"pk": S(k)}, ReturnValues=rv)

    def test_return_consumed_capacity(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k)})
        r = self.c.delete_item(TableName=HASH, Key={"pk": S(k)}, ReturnConsumedCapacity="TOTAL",
                               ReturnItemCollectionMetrics="NONE")
        self.assertEqual(r["ConsumedCapacity"], {"TableName": HASH, "CapacityUnits": 1.0})
        self.assertNotIn("ItemCollectionMetrics", r)
        self.invalid(self.raw.delete_item, constraint("'ALL'", "returnItemCollectionMetrics",
                                                      "satisfy enum value set: [SIZE, NONE]"),
                     TableName=HASH, Key={"pk": S(k)}, ReturnItemCollectionMetrics="ALL")

    def test_item_collection_metrics(self):
        k = uid()
        self.c.put_item(TableName=RANGE, Item={"pk": S(k), "sk": N(1), "l": S("a")})
        r = self.c.delete_item(TableName=RANGE, Key={"pk": S(k), "sk": N(1)},
                               ReturnItemCollectionMetrics="SIZE")
        self.assertEqual(r["ItemCollectionMetrics"],
                         {"ItemCollectionKey": {"pk": S(k)}, "SizeEstimateRangeGB": [0.0, 1.0]})
        r = self.c.delete_item(TableName=HASH, Key={"pk": S(k)},
                               ReturnItemCollectionMetrics="SIZE")
        self.assertNotIn("ItemCollectionMetrics", r)  # no local secondary index on HASH

    def test_expected_and_condition_expression_agree(self):
        for expected, op, text, values in CONDITIONS:
            with self.subTest(condition=text):
                outcomes = []
                for form in ("legacy", "expression"):
                    k = uid()
                    self.c.put_item(TableName=HASH, Item={"pk": S(k), "v": N(1), "w": S("x")})
                    kw = {"TableName": HASH, "Key": {"pk": S(k)}}
                    if form == "legacy":
                        kw["Expected"] = expected
                        if op:
                            kw["ConditionalOperator"] = op
                    else:
                        kw["ConditionExpression"] = text
                        if values:
                            kw["ExpressionAttributeValues"] = values
                    try:
                        self.c.delete_item(**kw)
                        ok = True
                    except self.c.exceptions.ConditionalCheckFailedException:
                        ok = False
                    self.assertEqual(self.exists(k), not ok)
                    outcomes.append(ok)
                self.assertEqual(outcomes[0], outcomes[1])

    def test_expression_attribute_names(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "name": S("x")})
        self.refused(self.c.delete_item, "ConditionalCheckFailedException",
                     "The conditional request failed", TableName=HASH, Key={"pk": S(k)},
                     ConditionExpression="#n = :v", ExpressionAttributeNames={"#n": "name"},
                     ExpressionAttributeValues={":v": S("y")})
        self.c.delete_item(TableName=HASH, Key={"pk": S(k)}, ConditionExpression="#n = :v",
                           ExpressionAttributeNames={"#n": "name"},
                           ExpressionAttributeValues={":v": S("x")})
        self.assertFalse(self.exists(k))

    def test_condition_failure_returns_old_item(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "v": N(1)})
        st, d = api("DeleteItem", {"TableName": HASH, "Key": {"pk": S(k)},
                                   "ConditionExpression": "attribute_not_exists(v)",
                                   "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
        self.assertEqual((st, d["__type"].split("#")[-1], d["message"]),
                         (400, "ConditionalCheckFailedException", "The conditional request failed"))
        self.assertEqual(d["Item"], {"pk": S(k), "v": N(1)})

    def test_errors(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.delete_item, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t,
                     Key={"pk": S("a")})
        self.invalid(self.c.delete_item, "The provided key element does not match the schema",
                     TableName=RANGE, Key={"pk": S("a"), "sk": S("1")})
        self.invalid(self.c.delete_item,
                     "Can not use both expression and non-expression parameters in the same "
                     "request: Non-expression parameters: {Expected} Expression parameters: "
                     "{ConditionExpression}", TableName=HASH, Key={"pk": S("a")},
                     Expected={"v": {"Exists": False}}, ConditionExpression="attribute_exists(v)")
        self.invalid(self.c.delete_item,
                     "One or more parameter values were invalid: Value cannot be used when "
                     "Exists is false for Attribute: v", TableName=HASH, Key={"pk": S("a")},
                     Expected={"v": {"Exists": False, "Value": N(1)}})
        self.invalid(self.c.delete_item,
                     "One or more parameter values were invalid: Value must be provided when "
                     "Exists is true for Attribute: v", TableName=HASH,
                     Key={"pk": S("a")}, Expected={"v": {"Exists": True}})
        self.invalid(self.c.delete_item,
                     "One or more parameter values were invalid: Invalid number of argument(s) "
                     "for the EQ ComparisonOperator", TableName=HASH, Key={"pk": S("a")},
                     Expected={"v": {"ComparisonOperator": "EQ", "AttributeValueList": []}})
        self.invalid(self.raw.delete_item,
                     constraint("null", "key", "not be null"), TableName=HASH)


if __name__ == "__main__":
    main([__file__])
