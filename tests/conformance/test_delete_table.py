"""DeleteTable: TableName; the TableDescription it answers (DELETING);
errors ResourceNotFoundException, ResourceInUseException (deletion
protection is test_smallops.py's) and ValidationException."""
from conformance import Case, main, poll, uid


class DeleteTable(Case):
    def test_delete(self):
        name = "conf-del-" + uid()
        self.c.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        poll(lambda: self.c.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE")
        d = self.c.delete_table(TableName=name)["TableDescription"]
        self.assertEqual((d["TableName"], d["TableStatus"]), (name, "DELETING"))
        self.assertIn("TableArn", d)
        names = lambda: [n for p in self.c.get_paginator("list_tables").paginate()
                         for n in p["TableNames"]]
        self.assertTrue(poll(lambda: name not in names()))
        self.refused(self.c.describe_table, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % name, TableName=name)
        self.refused(self.c.delete_table, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % name, TableName=name)

    def test_errors(self):
        self.invalid(self.raw.delete_table,
                     "The parameter 'TableName' is required but was not present in "
                     "the request")


if __name__ == "__main__":
    main([__file__])
