"""BatchWriteItem: RequestItems (PutRequest, DeleteRequest) on several
tables, ReturnConsumedCapacity, ReturnItemCollectionMetrics;
UnprocessedItems; errors ResourceNotFoundException and ValidationException."""
import re

from conformance import HASH, NUMKEY, RANGE, Case, N, S, constraint, main, uid


class BatchWriteItem(Case):
    def test_puts_and_deletes(self):
        a, b, gone = uid(), uid(), uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(gone)})
        r = self.c.batch_write_item(RequestItems={
            HASH: [{"PutRequest": {"Item": {"pk": S(a), "v": N(1)}}},
                   {"DeleteRequest": {"Key": {"pk": S(gone)}}},
                   {"DeleteRequest": {"Key": {"pk": S(uid())}}}],  # absent: no error
            RANGE: [{"PutRequest": {"Item": {"pk": S(b), "sk": N(1)}}}]},
            ReturnConsumedCapacity="TOTAL")
        self.assertEqual(r["UnprocessedItems"], {})
        self.assertEqual({c["TableName"] for c in r["ConsumedCapacity"]}, {HASH, RANGE})
        get = lambda t, k: self.c.get_item(TableName=t, Key=k, ConsistentRead=True).get("Item")
        self.assertEqual(get(HASH, {"pk": S(a)}), {"pk": S(a), "v": N(1)})
        self.assertIsNone(get(HASH, {"pk": S(gone)}))
        self.assertEqual(get(RANGE, {"pk": S(b), "sk": N(1)}), {"pk": S(b), "sk": N(1)})

    def test_item_collection_metrics(self):
        k = uid()
        r = self.c.batch_write_item(
            RequestItems={RANGE: [{"PutRequest": {"Item": {"pk": S(k), "sk": N(1)}}}]},
            ReturnItemCollectionMetrics="SIZE")
        self.assertEqual(r["ItemCollectionMetrics"][RANGE][0]["ItemCollectionKey"], {"pk": S(k)})
        # One entry per item collection touched (two writes in one
        # collection are one), none for a table without a local secondary
        # index.
        a, b = uid(), uid()
        r = self.c.batch_write_item(RequestItems={
            RANGE: [{"PutRequest": {"Item": {"pk": S(a), "sk": N(1), "l": S("x")}}},
                    {"PutRequest": {"Item": {"pk": S(a), "sk": N(2)}}},
                    {"DeleteRequest": {"Key": {"pk": S(b), "sk": N(1)}}}],
            HASH: [{"PutRequest": {"Item": {"pk": S(a)}}}]},
            ReturnItemCollectionMetrics="SIZE")
        got = r["ItemCollectionMetrics"]
        self.assertEqual(set(got), {RANGE})
        self.assertEqual(sorted(m["ItemCollectionKey"]["pk"]["S"] for m in got[RANGE]),
                         sorted([a, b]))
        for m in got[RANGE]:
            self.assertEqual(m["SizeEstimateRangeGB"], [0.0, 1.0])
        r = self.c.batch_write_item(
            RequestItems={RANGE: [{"PutRequest": {"Item": {"pk": S(a), "sk": N(3)}}}]})
        self.assertNotIn("ItemCollectionMetrics", r)

    def test_errors(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.batch_write_item, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t,
                     RequestItems={t: [{"PutRequest": {"Item": {"pk": S("a")}}}]})
        self.invalid(self.c.batch_write_item, "Provided list of item keys contains duplicates",
                     RequestItems={HASH: [{"PutRequest": {"Item": {"pk": S("a")}}},
                                          {"DeleteRequest": {"Key": {"pk": S("a")}}}]})
        # DynamoDB renders the map with Java's toString (object hashes);
        # Shoal leaves the value out.
        self.invalid(self.raw.batch_write_item, re.compile(
            r"^1 validation error detected: Value (?:'\{.*\}' )?at 'requestItems' failed to "
            r"satisfy constraint: Map value must satisfy constraint: \[Member must have length "
            r"less than or equal to 25, Member must have length greater than or equal to 1\]$"),
            RequestItems={HASH: [{"PutRequest": {"Item": {"pk": S(str(i))}}}
                                 for i in range(26)]})
        self.invalid(self.raw.batch_write_item, constraint("'{}'", "requestItems",
                                                           "have length greater than or equal "
                                                           "to 1"), RequestItems={})
        # Unlike PutItem, a PutRequest without its key is "does not match".
        self.invalid(self.c.batch_write_item, "The provided key element does not match the schema",
                     RequestItems={HASH: [{"PutRequest": {"Item": {"v": S("a")}}}]})
        self.invalid(self.c.batch_write_item, "The provided key element does not match the schema",
                     RequestItems={NUMKEY: [{"DeleteRequest": {"Key": {"pk": N(1)}}}]})
        self.invalid(self.raw.batch_write_item,
                     "Supplied AttributeValue is empty, must contain exactly one of the "
                     "supported datatypes",
                     RequestItems={HASH: [{"PutRequest": {"Item": {"pk": S("a"), "e": {}}}}]})
        self.invalid(self.c.batch_write_item, "Item size has exceeded the maximum allowed size",
                     RequestItems={HASH: [{"PutRequest": {"Item": {
                         "pk": S("a"), "big": S("x" * (400 * 1024))}}}]})

    def test_write_request_with_both_or_neither(self):
        # DynamoDB does not document these wordings: the exception only.
        for w in ({"PutRequest": {"Item": {"pk": S("a")}},
                   "DeleteRequest": {"Key": {"pk": S("b")}}},
                  {}):
            with self.subTest(request=w):
                self.invalid(self.raw.batch_write_item, RequestItems={HASH: [w]})


if __name__ == "__main__":
    main([__file__])
