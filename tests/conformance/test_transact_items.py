"""TransactGetItems (Get: Key, ProjectionExpression, ExpressionAttributeNames)
and TransactWriteItems (ConditionCheck, Put, Update, Delete; their
conditions, ReturnValuesOnConditionCheckFailure; ClientRequestToken,
ReturnConsumedCapacity); errors TransactionCanceledException with its
CancellationReasons, IdempotentParameterMismatchException,
ResourceNotFoundException, ValidationException.  (All-or-nothing across
groups, reasons of every kind and the coordinator's crash are test_txn.py's.)"""
import re

from conformance import HASH, RANGE, Case, N, S, constraint, main, read_item, uid


class TransactGetItems(Case):
    def test_gets(self):
        r = self.c.transact_get_items(TransactItems=[
            {"Get": {"TableName": RANGE, "Key": self.key("r1", 1)}},
            {"Get": {"TableName": RANGE, "Key": self.key("r1", 99)}},
            {"Get": {"TableName": RANGE, "Key": self.key("r2", 2),
                     "ProjectionExpression": "#n, s", "ExpressionAttributeNames": {"#n": "n"}}},
            {"Get": {"TableName": RANGE, "Key": self.key("r2", 3),
                     "ProjectionExpression": "nope"}}])
        self.assertEqual(r["Responses"], [
            {"Item": read_item("r1", 1)},
            {},                                         # absent item: no Item
            {"Item": {"n": N(20), "s": S("item-2")}},
            {}])                                        # nothing projected: no Item either

    def test_errors(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.transact_get_items, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t,
                     TransactItems=[{"Get": {"TableName": t, "Key": {"pk": S("a")}}}])
        self.invalid(self.c.transact_get_items, re.compile(
            r"^Transaction request cannot include multiple operations on one item"),
            TransactItems=[{"Get": {"TableName": HASH, "Key": {"pk": S("a")}}}] * 2)
        self.invalid(self.raw.transact_get_items, re.compile(
            r"^1 validation error detected: Value .*at 'transactItems' failed to satisfy "
            r"constraint: Member must have length less than or equal to 100$"),
            TransactItems=[{"Get": {"TableName": HASH, "Key": {"pk": S(str(i))}}}
                           for i in range(101)])
        self.invalid(self.raw.transact_get_items, re.compile(
            r"^1 validation error detected: Value .*at 'transactItems' failed to satisfy "
            r"constraint: Member must have length greater than or equal to 1$"),
            TransactItems=[])
        self.invalid(self.c.transact_get_items,
                     "The provided key element does not match the schema",
                     TransactItems=[{"Get": {"TableName": RANGE, "Key": {"pk": S("a")}}}])


class TransactWriteItems(Case):
    def get(self, k):
        return self.c.get_item(TableName=HASH, Key={"pk": S(k)}, ConsistentRead=True).get("Item")

    def test_every_action(self):
        a, b, c, d = uid(), uid(), uid(), uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(b), "v": N(1)})
        self.c.put_item(TableName=HASH, Item={"pk": S(c)})
        self.c.put_item(TableName=HASH, Item={"pk": S(d), "ok": N(1)})
        self.c.transact_write_items(TransactItems=[
            {"Put": {"TableName": HASH, "Item": {"pk": S(a)},
                     "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Update": {"TableName": HASH, "Key": {"pk": S(b)}, "UpdateExpression": "ADD v :one",
                        "ConditionExpression": "v = :one",
                        "ExpressionAttributeValues": {":one": N(1)}}},
            {"Delete": {"TableName": HASH, "Key": {"pk": S(c)}}},
            {"ConditionCheck": {"TableName": HASH, "Key": {"pk": S(d)},
                                "ConditionExpression": "#o = :one",
                                "ExpressionAttributeNames": {"#o": "ok"},
                                "ExpressionAttributeValues": {":one": N(1)}}}])
        self.assertEqual(self.get(a), {"pk": S(a)})
        self.assertEqual(self.get(b), {"pk": S(b), "v": N(2)})
        self.assertIsNone(self.get(c))

    def test_consumed_capacity(self):
        k = uid()
        r = self.c.transact_write_items(
            TransactItems=[{"Put": {"TableName": HASH, "Item": {"pk": S(k)}}}],
            ReturnConsumedCapacity="TOTAL", ReturnItemCollectionMetrics="NONE")
        # A transactional write costs twice a write's units.
        self.assertEqual(r["ConsumedCapacity"], [{"TableName": HASH, "CapacityUnits": 2.0}])
        self.assertNotIn("ItemCollectionMetrics", r)

    def test_item_collection_metrics(self):
        # Per table, one entry per item collection written; a
        # ConditionCheck writes none, a table without a local secondary
        # index has none.
        a, b = uid(), uid()
        self.c.put_item(TableName=RANGE, Item={"pk": S(b), "sk": N(1)})
        r = self.c.transact_write_items(TransactItems=[
            {"Put": {"TableName": RANGE, "Item": {"pk": S(a), "sk": N(1), "l": S("x")}}},
            {"Update": {"TableName": RANGE, "Key": {"pk": S(a), "sk": N(2)},
                        "UpdateExpression": "SET l = :l",
                        "ExpressionAttributeValues": {":l": S("y")}}},
            {"ConditionCheck": {"TableName": RANGE, "Key": {"pk": S(b), "sk": N(1)},
                                "ConditionExpression": "attribute_exists(pk)"}},
            {"Put": {"TableName": HASH, "Item": {"pk": S(a)}}}],
            ReturnItemCollectionMetrics="SIZE")
        self.assertEqual(r["ItemCollectionMetrics"], {RANGE: [
            {"ItemCollectionKey": {"pk": S(a)}, "SizeEstimateRangeGB": [0.0, 1.0]}]})
        r = self.c.transact_write_items(TransactItems=[
            {"Delete": {"TableName": RANGE, "Key": {"pk": S(a), "sk": N(1)}}}])
        self.assertNotIn("ItemCollectionMetrics", r)

    def test_cancellation_reasons_and_old_item(self):
        a, b = uid(), uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(b), "v": N(1)})
        with self.assertRaises(self.c.exceptions.TransactionCanceledException) as cm:
            self.c.transact_write_items(TransactItems=[
                {"Put": {"TableName": HASH, "Item": {"pk": S(a)}}},
                {"ConditionCheck": {"TableName": HASH, "Key": {"pk": S(b)},
                                    "ConditionExpression": "v = :two",
                                    "ExpressionAttributeValues": {":two": N(2)},
                                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}])
        e = cm.exception.response
        self.assertEqual(e["Error"]["Message"],
                         "Transaction cancelled, please refer cancellation reasons for specific "
                         "reasons [None, ConditionalCheckFailed]")
        self.assertEqual(e["CancellationReasons"], [
            {"Code": "None"},
            {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed",
             "Item": {"pk": S(b), "v": N(1)}}])
        self.assertIsNone(self.get(a))

    def test_client_request_token(self):
        k = uid()
        token = uid("tok")
        items = [{"Update": {"TableName": HASH, "Key": {"pk": S(k)},
                             "UpdateExpression": "ADD v :one",
                             "ExpressionAttributeValues": {":one": N(1)}}}]
        self.c.transact_write_items(TransactItems=items, ClientRequestToken=token)
        self.c.transact_write_items(TransactItems=items, ClientRequestToken=token)
        self.assertEqual(self.get(k)["v"], N(1))  # applied once
        self.refused(self.c.transact_write_items, "IdempotentParameterMismatchException",
                     re.compile(r"."), ClientRequestToken=token,
                     TransactItems=[{"Put": {"TableName": HASH, "Item": {"pk": S(k)}}}])
        self.invalid(self.raw.transact_write_items, re.compile(
            r"^1 validation error detected: Value '.*' at 'clientRequestToken' failed to satisfy "
            r"constraint: Member must have length less than or equal to 36$"),
            ClientRequestToken="x" * 37, TransactItems=items)

    def test_errors(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.transact_write_items, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t,
                     TransactItems=[{"Put": {"TableName": t, "Item": {"pk": S("a")}}}])
        k = {"pk": S(uid())}
        self.invalid(self.c.transact_write_items, re.compile(
            r"^Transaction request cannot include multiple operations on one item"),
            TransactItems=[{"Put": {"TableName": HASH, "Item": k}},
                           {"Delete": {"TableName": HASH, "Key": k}}])
        self.invalid(self.raw.transact_write_items,
                     "TransactItems can only contain one of Check, Put, Update or Delete",
                     TransactItems=[{"Put": {"TableName": HASH, "Item": k},
                                     "Delete": {"TableName": HASH, "Key": k}}])
        self.invalid(self.raw.transact_write_items, re.compile(
            r"^1 validation error detected: Value .*at 'transactItems' failed to satisfy "
            r"constraint: Member must have length less than or equal to 100$"),
            TransactItems=[{"Put": {"TableName": HASH, "Item": {"pk": S(str(i))}}}
                           for i in range(101)])
        self.invalid(self.c.transact_write_items,
                     "One or more parameter values were invalid: Missing the key pk in the item",
                     TransactItems=[{"Put": {"TableName": HASH, "Item": {"v": N(1)}}}])
        self.invalid(self.c.transact_write_items,
                     "One or more parameter values were invalid: Cannot update attribute pk. "
                     "This attribute is part of the key",
                     TransactItems=[{"Update": {"TableName": HASH, "Key": k,
                                                "UpdateExpression": "SET pk = :v",
                                                "ExpressionAttributeValues": {":v": S("x")}}}])
        self.invalid(self.raw.transact_write_items,
                     constraint("null", "transactItems.1.member.conditionCheck."
                                "conditionExpression", "not be null"),
                     TransactItems=[{"ConditionCheck": {"TableName": HASH, "Key": k}}])

    def test_action_constraint_paths(self):
        # An action's members are named from the request's top, with its place.
        k = {"pk": S(uid())}
        ok = {"Put": {"TableName": HASH, "Item": {"pk": S(uid())}}}
        self.invalid(self.raw.transact_write_items, constraint(
            "'ALL_NEW'", "transactItems.2.member.put.returnValuesOnConditionCheckFailure",
            "satisfy enum value set: [ALL_OLD, NONE]"),
            TransactItems=[ok, {"Put": {"TableName": HASH, "Item": k,
                                        "ReturnValuesOnConditionCheckFailure": "ALL_NEW"}}])
        self.invalid(self.raw.transact_write_items,
                     constraint("null", "transactItems.1.member.put.item", "not be null"),
                     TransactItems=[{"Put": {"TableName": HASH}}])
        self.invalid(self.raw.transact_write_items,
                     constraint("null", "transactItems.2.member.delete.key", "not be null"),
                     TransactItems=[ok, {"Delete": {"TableName": HASH}}])
        self.invalid(self.raw.transact_write_items, constraint(
            "'a b'", "transactItems.1.member.update.tableName",
            "satisfy regular expression pattern: [a-zA-Z0-9_.-]+"),
            TransactItems=[{"Update": {"TableName": "a b", "Key": k,
                                       "UpdateExpression": "REMOVE x"}}])
        self.invalid(self.raw.transact_write_items, constraint(
            "null", "transactItems.1.member.conditionCheck.tableName", "not be null"),
            TransactItems=[{"ConditionCheck": {"Key": k, "ConditionExpression": "a = a"}}])


if __name__ == "__main__":
    main([__file__])
