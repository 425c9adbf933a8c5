"""UpdateTable: TableName, AttributeDefinitions with GlobalSecondaryIndexUpdates
(Create, Delete), StreamSpecification, BillingMode, TableClass; the
TableDescription it answers; errors ResourceNotFoundException and
ValidationException.  (Throughput changes are test_provisioned.py's; a GSI
backfilled over data test_http.py's; stream enable/disable test_streams.py's.)"""
import re

from conformance import Case, N, S, main, poll, uid

INVALID = "One or more parameter values were invalid: "


class UpdateTable(Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.t = "conf-ut-" + uid()
        cls.c.create_table(TableName=cls.t, BillingMode="PAY_PER_REQUEST",
                           AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                           KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        poll(lambda: cls.c.describe_table(TableName=cls.t)["Table"]["TableStatus"] == "ACTIVE")

    def test_add_and_delete_index(self):
        self.c.put_item(TableName=self.t, Item={"pk": S("a"), "g": N(7)})
        d = self.c.update_table(
            TableName=self.t, AttributeDefinitions=[{"AttributeName": "g", "AttributeType": "N"}],
            GlobalSecondaryIndexUpdates=[{"Create": {
                "IndexName": "byG", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"}}}])["TableDescription"]
        self.assertEqual(d["TableName"], self.t)
        g, = d["GlobalSecondaryIndexes"]
        self.assertEqual(g["IndexName"], "byG")
        self.assertIn(g["IndexStatus"], ("CREATING", "ACTIVE"))
        self.assertTrue(poll(lambda: self.c.describe_table(TableName=self.t)["Table"][
            "GlobalSecondaryIndexes"][0]["IndexStatus"] == "ACTIVE"))
        r = poll(lambda: self.c.query(TableName=self.t, IndexName="byG",
                                      KeyConditionExpression="g = :g",
                                      ExpressionAttributeValues={":g": N(7)})["Items"])
        self.assertEqual(r, [{"pk": S("a"), "g": N(7)}])
        self.invalid(self.c.update_table, INVALID + "Index already exists",
                     TableName=self.t,
                     AttributeDefinitions=[{"AttributeName": "g", "AttributeType": "N"}],
                     GlobalSecondaryIndexUpdates=[{"Create": {
                         "IndexName": "byG",
                         "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                         "Projection": {"ProjectionType": "KEYS_ONLY"}}}])
        self.c.update_table(TableName=self.t,
                            GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byG"}}])
        self.assertTrue(poll(lambda: "GlobalSecondaryIndexes" not in
                             self.c.describe_table(TableName=self.t)["Table"]))
        self.refused(self.c.update_table, "ResourceNotFoundException",
                     "Requested resource not found: Index: byG not found", TableName=self.t,
                     GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byG"}}])

    def test_table_class(self):
        d = self.c.update_table(TableName=self.t, TableClass="STANDARD_INFREQUENT_ACCESS")
        self.assertEqual(d["TableDescription"]["TableClassSummary"]["TableClass"],
                         "STANDARD_INFREQUENT_ACCESS")
        self.assertTrue(poll(lambda: self.c.describe_table(TableName=self.t)["Table"].get(
            "TableClassSummary", {}).get("TableClass") == "STANDARD_INFREQUENT_ACCESS"))
        self.invalid(self.raw.update_table, re.compile(r"^1 validation error detected: Value "
                                                       r"'COLD' at 'tableClass'"),
                     TableName=self.t, TableClass="COLD")

    def test_errors(self):
        t = "conf-absent-" + uid()
        self.refused(self.c.update_table, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t,
                     BillingMode="PAY_PER_REQUEST")
        self.invalid(self.c.update_table, re.compile(
            r"^At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, "
            r"GlobalSecondaryIndexUpdates or SSESpecification or ReplicaUpdates is required"),
            TableName=self.t)
        self.invalid(self.c.update_table, re.compile(
            r"^One or more parameter values were invalid: Only one global secondary index "
            r"update per index is allowed simultaneously|Subscriber limit exceeded"),
            TableName=self.t,
            GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "aa1"}},
                                         {"Delete": {"IndexName": "aa1"}}])
        self.invalid(self.c.update_table, re.compile(r"StreamViewType"), TableName=self.t,
                     StreamSpecification={"StreamEnabled": True})
        self.invalid(self.raw.update_table, re.compile(r"GlobalSecondaryIndexUpdate"),
                     TableName=self.t, GlobalSecondaryIndexUpdates=[{}])


if __name__ == "__main__":
    main([__file__])
