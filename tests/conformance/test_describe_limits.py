"""DescribeLimits and DescribeEndpoints: no parameters; every member of the
answer that botocore's model defines, with its type.  (The values are
test_smallops.py's.)"""
from conformance import Case, main


class DescribeLimits(Case):
    def test_members(self):
        r = self.c.describe_limits()
        for m in ("AccountMaxReadCapacityUnits", "AccountMaxWriteCapacityUnits",
                  "TableMaxReadCapacityUnits", "TableMaxWriteCapacityUnits"):
            self.assertIsInstance(r[m], int, m)
            self.assertGreater(r[m], 0, m)
        self.assertLessEqual(r["TableMaxReadCapacityUnits"], r["AccountMaxReadCapacityUnits"])


class DescribeEndpoints(Case):
    def test_members(self):
        eps = self.c.describe_endpoints()["Endpoints"]
        self.assertEqual(len(eps), 1)
        self.assertEqual(set(eps[0]), {"Address", "CachePeriodInMinutes"})
        self.assertIsInstance(eps[0]["CachePeriodInMinutes"], int)


if __name__ == "__main__":
    main([__file__])
