"""BatchGetItem: RequestItems (Keys, ConsistentRead, ProjectionExpression
and AttributesToGet (legacy), ExpressionAttributeNames), several tables,
ReturnConsumedCapacity; UnprocessedKeys; errors ResourceNotFoundException
and ValidationException.  (The 100-key page over two tables is
test_http.py's test_batches.)"""
from conformance import HASH, RANGE, Case, N, S, constraint, main, read_item, uid


class BatchGetItem(Case):
    def test_items_both_ways(self):
        keys = [self.key("r1", k) for k in (1, 4, 99)] + [self.key("r2", 2)]
        a = self.c.batch_get_item(RequestItems={RANGE: {"Keys": keys,
                                                        "AttributesToGet": ["pk", "sk", "n"]}})
        b = self.c.batch_get_item(RequestItems={RANGE: {
            "Keys": keys, "ProjectionExpression": "pk, #s, n",
            "ExpressionAttributeNames": {"#s": "sk"}}})
        order = lambda r: sorted(r["Responses"][RANGE], key=lambda i: (i["pk"]["S"], i["sk"]["N"]))
        self.assertEqual(order(a), order(b))
        self.assertEqual(order(a), [{k: v for k, v in read_item(p, s).items()
                                     if k in ("pk", "sk", "n")}
                                    for p, s in (("r1", 1), ("r1", 4), ("r2", 2))])
        self.assertEqual(a["UnprocessedKeys"], {})
        # A projection that matches nothing on a present item: an empty item.
        r = self.c.batch_get_item(RequestItems={RANGE: {"Keys": keys[:1],
                                                        "ProjectionExpression": "nope"}})
        self.assertEqual(r["Responses"][RANGE], [{}])

    def test_tables_and_consistent_read(self):
        k = uid()
        self.c.put_item(TableName=HASH, Item={"pk": S(k), "v": N(1)})
        r = self.c.batch_get_item(RequestItems={
            HASH: {"Keys": [{"pk": S(k)}], "ConsistentRead": True},
            RANGE: {"Keys": [self.key("r1", 1)], "ConsistentRead": False}},
            ReturnConsumedCapacity="TOTAL")
        self.assertEqual(r["Responses"][HASH], [{"pk": S(k), "v": N(1)}])
        self.assertEqual(r["Responses"][RANGE], [read_item("r1", 1)])
        got = {c["TableName"]: c["CapacityUnits"] for c in r["ConsumedCapacity"]}
        self.assertEqual(got, {HASH: 1.0, RANGE: 0.5})

    def test_errors(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.batch_get_item, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t,
                     RequestItems={t: {"Keys": [{"pk": S("a")}]}})
        self.invalid(self.c.batch_get_item, "The provided key element does not match the schema",
                     RequestItems={RANGE: {"Keys": [{"pk": S("a")}]}})
        self.invalid(self.c.batch_get_item, "Provided list of item keys contains duplicates",
                     RequestItems={HASH: {"Keys": [{"pk": S("a")}, {"pk": S("a")}]}})
        self.invalid(self.c.batch_get_item,
                     "Too many items requested for the BatchGetItem call",
                     RequestItems={HASH: {"Keys": [{"pk": S(str(i))} for i in range(101)]}})
        self.invalid(self.raw.batch_get_item,
                     constraint("'{}'", "requestItems",
                                "have length greater than or equal to 1"), RequestItems={})
        self.invalid(self.c.batch_get_item,
                     "Can not use both expression and non-expression parameters in the same "
                     "request: Non-expression parameters: {AttributesToGet} Expression "
                     "parameters: {ProjectionExpression}",
                     RequestItems={HASH: {"Keys": [{"pk": S("a")}], "AttributesToGet": ["v"],
                                          "ProjectionExpression": "v"}})
        self.invalid(self.c.batch_get_item,
                     "Value provided in ExpressionAttributeNames unused in expressions: "
                     "keys: {#u}",
                     RequestItems={HASH: {"Keys": [{"pk": S("a")}], "ProjectionExpression": "v",
                                          "ExpressionAttributeNames": {"#u": "u"}}})


if __name__ == "__main__":
    main([__file__])
