"""DescribeTable: TableName; the TableDescription of a table with both kinds
of index and a stream; errors ResourceNotFoundException and
ValidationException.  (ARNs, TableId and billing summaries in depth are
test_smallops.py's.)"""
from conformance import RANGE, STREAM, Case, api, main, uid


class DescribeTable(Case):
    def test_description(self):
        t = self.c.describe_table(TableName=RANGE)["Table"]
        self.assertEqual(t["TableName"], RANGE)
        self.assertEqual(t["TableStatus"], "ACTIVE")
        self.assertEqual(t["KeySchema"], [{"AttributeName": "pk", "KeyType": "HASH"},
                                          {"AttributeName": "sk", "KeyType": "RANGE"}])
        for member in ("CreationDateTime", "TableSizeBytes", "ItemCount", "TableArn", "TableId",
                       "ProvisionedThroughput", "BillingModeSummary"):
            self.assertIn(member, t)
        # On-demand tables show zero provisioned units, as DynamoDB does.
        self.assertEqual((t["ProvisionedThroughput"]["ReadCapacityUnits"],
                          t["ProvisionedThroughput"]["WriteCapacityUnits"]), (0, 0))
        lsi, = t["LocalSecondaryIndexes"]
        self.assertEqual(lsi["IndexName"], "byL")
        self.assertEqual(lsi["Projection"], {"ProjectionType": "ALL"})
        gsi, = t["GlobalSecondaryIndexes"]
        self.assertEqual((gsi["IndexName"], gsi["IndexStatus"]), ("byG", "ACTIVE"))
        self.assertEqual(gsi["Projection"],
                         {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["x"]})
        self.assertNotIn("StreamSpecification", t)
        s = self.c.describe_table(TableName=STREAM)["Table"]
        self.assertEqual(s["StreamSpecification"], {"StreamEnabled": True,
                                                    "StreamViewType": "NEW_AND_OLD_IMAGES"})
        self.assertTrue(s["LatestStreamArn"].startswith(s["TableArn"] + "/stream/"))

    def test_members_botocore_1_29_does_not_model(self):
        # Debian's botocore drops what its model lacks: read the raw answer.
        st, d = api("DescribeTable", {"TableName": RANGE})
        self.assertEqual(st, 200, d)
        self.assertIs(d["Table"]["DeletionProtectionEnabled"], False)
        for index in d["Table"]["GlobalSecondaryIndexes"] + d["Table"]["LocalSecondaryIndexes"]:
            self.assertIsInstance(index["IndexSizeBytes"], int)
            self.assertIsInstance(index["ItemCount"], int)

    def test_errors(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.describe_table, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t)
        self.invalid(self.raw.describe_table,
                     "The parameter 'TableName' is required but was not present in "
                     "the request")


if __name__ == "__main__":
    main([__file__])
