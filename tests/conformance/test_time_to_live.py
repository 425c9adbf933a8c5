"""UpdateTimeToLive (TableName, TimeToLiveSpecification) and
DescribeTimeToLive (TableName): the answers' shapes and the errors not
already in tests/integration/http/test_ttl.py (which checks every status
change, the documented errors, the CLIs and expiry itself)."""
from conformance import HASH, Case, constraint, main, poll, uid


class TimeToLive(Case):
    def test_update_and_describe(self):
        t = "conf-ttl-" + uid()
        self.c.create_table(TableName=t, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        poll(lambda: self.c.describe_table(TableName=t)["Table"]["TableStatus"] == "ACTIVE")
        self.assertEqual(self.c.describe_time_to_live(TableName=t)["TimeToLiveDescription"],
                         {"TimeToLiveStatus": "DISABLED"})
        r = self.c.update_time_to_live(TableName=t, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "expires at"})
        self.assertEqual(r["TimeToLiveSpecification"],
                         {"Enabled": True, "AttributeName": "expires at"})
        self.assertEqual(self.c.describe_time_to_live(TableName=t)["TimeToLiveDescription"],
                         {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires at"})
        self.c.delete_table(TableName=t)

    def test_errors(self):
        self.invalid(self.raw.update_time_to_live,
                     constraint("null", "timeToLiveSpecification", "not be null"),
                     TableName=HASH)
        t = "conf-absent-" + uid()
        self.refused(self.c.describe_time_to_live, "ResourceNotFoundException",
                     "Requested resource not found: Table: %s not found" % t, TableName=t)


if __name__ == "__main__":
    main([__file__])
