"""UpdateItem: TableName, Key, UpdateExpression (SET, REMOVE, ADD, DELETE,
if_not_exists, list_append, arithmetic), AttributeUpdates (legacy PUT, ADD,
DELETE), ConditionExpression and Expected, ExpressionAttributeNames/Values,
ReturnValues (all five), ReturnValuesOnConditionCheckFailure; errors
ConditionalCheckFailedException, ResourceNotFoundException,
ValidationException."""
import re

from conformance import HASH, RANGE, Case, N, S, api, constraint, main, uid

# (AttributeUpdates, UpdateExpression, names, values): the same change both
# ways, applied to {pk, n: 5, s: "a", ss: {x, y}, ns: {1, 2}, l: [1]}.
UPDATES = [
    ({"n": {"Action": "PUT", "Value": N(7)}}, "SET n = :a", {}, {":a": N(7)}),
    ({"fresh": {"Action": "PUT", "Value": S("v")}}, "SET fresh = :a", {}, {":a": S("v")}),
    ({"s": {"Action": "DELETE"}}, "REMOVE s", {}, {}),
    ({"absent": {"Action": "DELETE"}}, "REMOVE absent", {}, {}),
    ({"n": {"Action": "ADD", "Value": N(-2)}}, "ADD n :a", {}, {":a": N(-2)}),
    ({"c": {"Action": "ADD", "Value": N(3)}}, "ADD c :a", {}, {":a": N(3)}),
    ({"ss": {"Action": "ADD", "Value": {"SS": ["z"]}}}, "ADD ss :a", {}, {":a": {"SS": ["z"]}}),
    ({"ss": {"Action": "DELETE", "Value": {"SS": ["x"]}}}, "DELETE ss :a", {},
     {":a": {"SS": ["x"]}}),
    ({"ns": {"Action": "DELETE", "Value": {"NS": ["1", "2"]}}}, "DELETE ns :a", {},
     {":a": {"NS": ["1", "2"]}}),
    ({"nset": {"Action": "ADD", "Value": {"NS": ["4"]}}}, "ADD nset :a", {},
     {":a": {"NS": ["4"]}}),
    ({"l": {"Action": "ADD", "Value": {"L": [N(2)]}}}, "SET l = list_append(l, :a)", {},
     {":a": {"L": [N(2)]}}),
    ({"n": {"Action": "PUT", "Value": N(1)}, "s": {"Action": "DELETE"},
      "ss": {"Action": "ADD", "Value": {"SS": ["w"]}}},
     "SET #n = :a REMOVE s ADD ss :b", {"#n": "n"}, {":a": N(1), ":b": {"SS": ["w"]}}),
]


def base(k):
    return {"pk": S(k), "n": N(5), "s": S("a"), "ss": {"SS": ["x", "y"]},
            "ns": {"NS": ["1", "2"]}, "l": {"L": [N(1)]}}


def norm(item):
    """Sets compared as sets."""
    out = {}
    for a, v in (item or {}).items():
        t, x = next(iter(v.items()))
        out[a] = (t, sorted(x)) if t in ("SS", "NS", "BS") else v
    return out


class UpdateItem(Case):
    def get(self, k):
        return self.c.get_item(TableName=HASH, Key={"pk": S(k)}, ConsistentRead=True).get("Item")

    def test_attribute_updates_and_update_expression_agree(self):
        for legacy, text, names, values in UPDATES:
            with self.subTest(update=text):
                got = []
                for form in ("legacy", "expression"):
                    k = uid()
                    self.c.put_item(TableName=HASH, Item=base(k))
                    kw = {"TableName": HASH, "Key": {"pk": S(k)}, "ReturnValues": "ALL_NEW"}
                    if form == "legacy":
                        kw["AttributeUpdates"] = legacy
                    else:
                        kw["UpdateExpression"] = text
                        if names:
                            kw["ExpressionAttributeNames"] = names
                        if values:
                            kw["ExpressionAttributeValues"] = values
                    r = self.c.update_item(**kw)
                    stored = self.get(k)
                    self.assertEqual(norm(r["Attributes"]), norm(stored))
                    stored.pop("pk")
                    got.append(norm(stored))
                self.assertEqual(got[0], got[1])

    def test_upsert_both_ways(self):
        k1, k2 = uid(), uid()
        self.c.update_item(TableName=HASH, Key={"pk": S(k1)},
                           AttributeUpdates={"c": {"Action": "ADD", "Value": N(1)}})
        self.c.update_item(TableName=HASH, Key={"pk": S(k2)}, UpdateExpression="ADD c :a",
                           ExpressionAttributeValues={":a": N(1)})
        self.assertEqual(self.get(k1), {"pk": S(k1), "c": N(1)})
        self.assertEqual(self.get(k2), {"pk": S(k2), "c": N(1)})
        # Neither form with nothing to update creates the item with its key.
        k3 = uid()
        self.c.update_item(TableName=HASH, Key={"pk": S(k3)})
        self.assertEqual(self.get(k3), {"pk": S(k3)})

    def test_return_values(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "a": N(1), "b": N(2)})
        want = {
            "NONE": None,
            "ALL_OLD": {"pk": S(k), "a": N(1), "b": N(2)},
            "UPDATED_OLD": {"a": N(1)},
            "ALL_NEW": {"pk": S(k), "a": N(2), "b": N(2), "c": N(1)},
            "UPDATED_NEW": {"a": N(2), "c": N(1)},
        }
        for rv, w in want.items():
            with self.subTest(rv=rv):
                self.c.put_item(TableName=HASH, Item={"pk": S(k), "a": N(1), "b": N(2)})
                r = self.c.update_item(TableName=HASH, Key={"pk": S(k)},
                                       UpdateExpression="SET a = a + :one, c = :one",
                                       ExpressionAttributeValues={":one": N(1)},
                                       ReturnValues=rv)
                self.assertEqual(r.get("Attributes"), w)
        self.invalid(self.raw.update_item,
                     constraint("'BAD'", "returnValues", "satisfy enum value set: [ALL_NEW, "
                                "UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]"),
                     TableName=HASH, Key={"pk": S(k)}, ReturnValues="BAD")

    def test_updated_values_of_nested_paths(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "m": {"M": {"a": {"M": {"b": N(1)}},
                                                                      "z": N(0)}},
                                              "l": {"L": [N(0), N(1)]}})
        r = self.c.update_item(TableName=HASH, Key={"pk": S(k)}, ReturnValues="UPDATED_NEW",
                               UpdateExpression="SET m.a.c = :x, l[1] = :x",
                               ExpressionAttributeValues={":x": S("x")})
        # Only the paths written, in their documents' shape.
        self.assertEqual(r["Attributes"], {"m": {"M": {"a": {"M": {"c": S("x")}}}},
                                           "l": {"L": [S("x")]}})
        r = self.c.update_item(TableName=HASH, Key={"pk": S(k)}, ReturnValues="UPDATED_OLD",
                               UpdateExpression="SET m.a.b = :x, fresh = :x",
                               ExpressionAttributeValues={":x": S("y")})
        self.assertEqual(r["Attributes"], {"m": {"M": {"a": {"M": {"b": N(1)}}}}})
        r = self.c.update_item(TableName=HASH, Key={"pk": S(k)}, ReturnValues="UPDATED_OLD",
                               UpdateExpression="SET brand_new = :x",
                               ExpressionAttributeValues={":x": S("y")})
        self.assertNotIn("Attributes", r)

    def test_functions(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "n": N(5), "l": {"L": [N(1)]},
                                              "m": {"M": {"x": N(1)}}})
        r = self.c.update_item(
            TableName=HASH, Key={"pk": S(k)}, ReturnValues="UPDATED_NEW",
            UpdateExpression="SET a = if_not_exists(a, :z), n = if_not_exists(n, :z), "
                             "l = list_append(:h, l), m.y = n - :one",
            ExpressionAttributeValues={":z": N(0), ":h": {"L": [S("h")]}, ":one": N(1)})
        self.assertEqual(r["Attributes"], {"a": N(0), "n": N(5), "l": {"L": [S("h"), N(1)]},
                                           "m": {"M": {"y": N(4)}}})

    def test_document_paths(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "l": {"L": [N(0), N(1), N(2)]},
                                              "m": {"M": {"a": {"M": {"b": N(1)}}}}})
        r = self.c.update_item(
            TableName=HASH, Key={"pk": S(k)}, ReturnValues="ALL_NEW",
            UpdateExpression="SET l[9] = :x, m.a.c = :x, #dot = :x REMOVE l[0], m.a.b",
            ExpressionAttributeNames={"#dot": "a.b"}, ExpressionAttributeValues={":x": S("x")})
        # An index past the end appends; REMOVE of an element shifts the rest.
        self.assertEqual(r["Attributes"], {"pk": S(k), "l": {"L": [N(1), N(2), S("x")]},
                                           "m": {"M": {"a": {"M": {"c": S("x")}}}},
                                           "a.b": S("x")})
        for text in ("SET nope.x = :x", "SET m.nope.x = :x", "SET l[0].x = :x"):
            with self.subTest(update=text):
                self.invalid(self.c.update_item, "The document path provided in the update "
                             "expression is invalid for update", TableName=HASH,
                             Key={"pk": S(k)}, UpdateExpression=text,
                             ExpressionAttributeValues={":x": S("x")})

    def test_set_operations(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "ss": {"SS": ["a"]}, "n": N(1)})
        self.invalid(self.c.update_item, "An operand in the update expression has an incorrect "
                     "data type", TableName=HASH, Key={"pk": S(k)}, UpdateExpression="ADD ss :v",
                     ExpressionAttributeValues={":v": {"NS": ["1"]}})
        self.invalid(self.c.update_item, "An operand in the update expression has an incorrect "
                     "data type", TableName=HASH, Key={"pk": S(k)},
                     UpdateExpression="DELETE n :v",
                     ExpressionAttributeValues={":v": {"NS": ["1"]}})
        self.invalid(self.c.update_item, "Invalid UpdateExpression: Incorrect operand type for "
                     "operator or function; operator: DELETE, operand type: NUMBER",
                     TableName=HASH, Key={"pk": S(k)}, UpdateExpression="DELETE ss :v",
                     ExpressionAttributeValues={":v": N(1)})
        # Deleting the last member removes the attribute.
        r = self.c.update_item(TableName=HASH, Key={"pk": S(k)}, UpdateExpression="DELETE ss :v",
                               ExpressionAttributeValues={":v": {"SS": ["a", "zz"]}},
                               ReturnValues="ALL_NEW")
        self.assertEqual(r["Attributes"], {"pk": S(k), "n": N(1)})

    def test_conditions_legacy_and_expression(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "v": N(1)})
        for kw in ({"Expected": {"v": {"Value": N(2)}},
                    "AttributeUpdates": {"v": {"Action": "PUT", "Value": N(3)}}},
                   {"ConditionExpression": "v = :two", "UpdateExpression": "SET v = :three",
                    "ExpressionAttributeValues": {":two": N(2), ":three": N(3)}}):
            self.refused(self.c.update_item, "ConditionalCheckFailedException",
                         "The conditional request failed", TableName=HASH, Key={"pk": S(k)},
                         **kw)
        self.assertEqual(self.get(k)["v"], N(1))
        st, d = api("UpdateItem", {"TableName": HASH, "Key": {"pk": S(k)},
                                   "UpdateExpression": "SET v = :v",
                                   "ConditionExpression": "v = :v",
                                   "ExpressionAttributeValues": {":v": N(9)},
                                   "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
        self.assertEqual((st, d["__type"].split("#")[-1]), (400, "ConditionalCheckFailedException"))
        self.assertEqual(d["Item"], {"pk": S(k), "v": N(1)})

    def test_item_collection_metrics(self):
        # On a table with a local secondary index: the item's collection.
        k = uid()
        r = self.c.update_item(TableName=RANGE, Key={"pk": S(k), "sk": N(1)},
                               UpdateExpression="SET l = :l",
                               ExpressionAttributeValues={":l": S("a")},
                               ReturnItemCollectionMetrics="SIZE")
        self.assertEqual(r["ItemCollectionMetrics"],
                         {"ItemCollectionKey": {"pk": S(k)}, "SizeEstimateRangeGB": [0.0, 1.0]})
        r = self.c.update_item(TableName=RANGE, Key={"pk": S(k), "sk": N(1)},
                               UpdateExpression="SET l = :l",
                               ExpressionAttributeValues={":l": S("b")})
        self.assertNotIn("ItemCollectionMetrics", r)

    def test_conditional_operator_and_capacity(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "a": N(1)})
        expected = {"a": {"Value": N(2)}, "b": {"Exists": False}}
        self.refused(self.c.update_item, "ConditionalCheckFailedException",
                     "The conditional request failed", TableName=HASH, Key={"pk": S(k)},
                     Expected=expected, ConditionalOperator="AND",
                     AttributeUpdates={"c": {"Action": "PUT", "Value": N(1)}})
        r = self.c.update_item(TableName=HASH, Key={"pk": S(k)}, Expected=expected,
                               ConditionalOperator="OR",
                               AttributeUpdates={"c": {"Action": "PUT", "Value": N(1)}},
                               ReturnConsumedCapacity="TOTAL", ReturnItemCollectionMetrics="SIZE")
        self.assertEqual(r["ConsumedCapacity"], {"TableName": HASH, "CapacityUnits": 1.0})
        self.assertNotIn("ItemCollectionMetrics", r)  # no local secondary index on HASH
        self.assertEqual(self.get(k)["c"], N(1))
        self.invalid(self.c.update_item,
                     "ConditionalOperator can only be used when Filter or Expected has two or "
                     "more elements", TableName=HASH, Key={"pk": S(k)},
                     Expected={"a": {"Value": N(1)}}, ConditionalOperator="OR")

    def test_table_not_found(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.update_item, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t,
                     Key={"pk": S("a")}, UpdateExpression="SET a = :a",
                     ExpressionAttributeValues={":a": N(1)})

    def test_key_errors(self):
        self.invalid(self.c.update_item, "The provided key element does not match the schema",
                     TableName=RANGE, Key={"pk": S("a")}, UpdateExpression="SET a = :a",
                     ExpressionAttributeValues={":a": N(1)})
        self.invalid(self.c.update_item,
                     "One or more parameter values were invalid: Cannot update attribute pk. "
                     "This attribute is part of the key", TableName=HASH, Key={"pk": S("a")},
                     UpdateExpression="SET pk = :a", ExpressionAttributeValues={":a": S("b")})
        self.invalid(self.c.update_item,
                     "One or more parameter values were invalid: Cannot update attribute sk. "
                     "This attribute is part of the key", TableName=RANGE,
                     Key={"pk": S("a"), "sk": N(1)},
                     AttributeUpdates={"sk": {"Action": "PUT", "Value": N(2)}})

    def test_update_expression_errors(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "s": S("x"), "l": {"L": []}})
        kw = {"TableName": HASH, "Key": {"pk": S(k)}}
        self.invalid(self.c.update_item,
                     "Invalid UpdateExpression: Two document paths overlap with each other; "
                     "must remove or rewrite one of these paths; path one: [a], path two: [a, b]",
                     UpdateExpression="SET a = :v, a.b = :v",
                     ExpressionAttributeValues={":v": N(1)}, **kw)
        self.invalid(self.c.update_item,
                     "Invalid UpdateExpression: Two document paths overlap with each other; "
                     "must remove or rewrite one of these paths; path one: [a], path two: [a]",
                     UpdateExpression="SET a = :v REMOVE a",
                     ExpressionAttributeValues={":v": N(1)}, **kw)
        self.invalid(self.c.update_item,
                     "Invalid UpdateExpression: The \"SET\" section can only be used once in an "
                     "update expression;", UpdateExpression="SET a = :v SET b = :v",
                     ExpressionAttributeValues={":v": N(1)}, **kw)
        self.invalid(self.c.update_item,
                     "Invalid UpdateExpression: An expression attribute value used in "
                     "expression is not defined; attribute value: :x",
                     UpdateExpression="SET a = :x", ExpressionAttributeValues={":v": N(1)}, **kw)
        self.invalid(self.c.update_item,
                     "Invalid UpdateExpression: Incorrect operand type for operator or "
                     "function; operator: ADD, operand type: LIST",
                     UpdateExpression="ADD a :v", ExpressionAttributeValues={":v": {"L": []}},
                     **kw)
        self.invalid(self.c.update_item,
                     "An operand in the update expression has an incorrect data type",
                     UpdateExpression="SET s = s + :v", ExpressionAttributeValues={":v": N(1)},
                     **kw)
        self.invalid(self.c.update_item,
                     "The document path provided in the update expression is invalid for update",
                     UpdateExpression="SET s.a = :v", ExpressionAttributeValues={":v": N(1)},
                     **kw)
        self.invalid(self.c.update_item,
                     "Invalid UpdateExpression: The expression can not be empty;",
                     UpdateExpression="", **kw)
        self.invalid(self.c.update_item, re.compile(
            r"^Invalid UpdateExpression: Syntax error; token: "),
            UpdateExpression="SET a", **kw)
        self.invalid(self.c.update_item,
                     "Invalid UpdateExpression: Attribute name is a reserved keyword; "
                     "reserved keyword: name", UpdateExpression="REMOVE name", **kw)

    def test_legacy_errors(self):
        kw = {"TableName": HASH, "Key": {"pk": S(uid())}}
        self.invalid(self.c.update_item,
                     "Can not use both expression and non-expression parameters in the same "
                     "request: Non-expression parameters: {AttributeUpdates} Expression "
                     "parameters: {UpdateExpression}",
                     AttributeUpdates={"a": {"Action": "DELETE"}}, UpdateExpression="REMOVE b",
                     **kw)
        self.invalid(self.c.update_item,
                     "Can not use both expression and non-expression parameters in the same "
                     "request: Non-expression parameters: {Expected} Expression parameters: "
                     "{UpdateExpression}", Expected={"a": {"Exists": False}},
                     UpdateExpression="REMOVE b", **kw)
        self.invalid(self.c.update_item, re.compile(
            r"^One or more parameter values were invalid: Only DELETE action is allowed when "
            r"no attribute value is specified"),
            AttributeUpdates={"a": {"Action": "PUT"}}, **kw)
        self.invalid(self.c.update_item, re.compile(
            r"^One or more parameter values were invalid: ADD action is not supported for "
            r"the type S"), AttributeUpdates={"a": {"Action": "ADD", "Value": S("x")}}, **kw)
        self.invalid(self.c.update_item, re.compile(
            r"^One or more parameter values were invalid: DELETE action with value is not "
            r"supported for the type N"),
            AttributeUpdates={"a": {"Action": "DELETE", "Value": N(1)}}, **kw)

    def test_item_size_after_update(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "a": S("x" * (300 * 1024))})
        self.invalid(self.c.update_item,
                     "Item size to update has exceeded the maximum allowed size",
                     TableName=HASH, Key={"pk": S(k)}, UpdateExpression="SET b = :v",
                     ExpressionAttributeValues={":v": S("y" * (150 * 1024))})


if __name__ == "__main__":
    main([__file__])
