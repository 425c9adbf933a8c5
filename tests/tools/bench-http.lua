-- bench-http.lua -- wrk's side of `make bench-http` (tests/tools/bench-http.sh): DynamoDB
-- GetItem / PutItem at the router's HTTP endpoint with Debian's wrk as the client.
--
--   wrk -tT -cC -dD --latency -s bench-http.lua URL -- get|put [KEYS] [check]
--
-- Keys are shoal_bench's (table "bench", PK "c<n>" for n uniform in [0, KEYS), SK "000000";
-- KEYS defaults to 100000), so a get run reads the items `shoal_bench --load-only` loaded.
-- put writes attribute "v" of 100 bytes.  Requests are unsigned, as the endpoint accepts
-- without --http-credentials.  One request in flight per connection (wrk's model).
--
-- Without "check" the script defines no response() callback, so that wrk does not build a
-- Lua string of every answer: the client's CPU per request stays small and the figure is
-- the server's.  With "check", every answer is looked at: non-200 answers and (get) 200
-- answers without an "Item" are counted (bench-http.sh checks the loaded keys with it).
--
-- done() prints the line bench-http.sh parses:
--   RESULT requests=N ops_s=X p50_us=N p99_us=N errors=N misses=N secs=X
-- ops_s counts requests minus non-2xx answers; errors = non-2xx + socket errors.

local threads = {}

function setup(thread)
	thread:set("id", #threads)
	table.insert(threads, thread)
end

local mode, nkeys, check
local headers
local value = string.rep("v", 100)

function init(args)
	mode = args[1] or "get"
	assert(mode == "get" or mode == "put", "MODE: get or put")
	nkeys = tonumber(args[2] or "100000")
	assert(nkeys and nkeys >= 1, "KEYS: a positive number")
	check = args[3] == "check"
	headers = {
		["X-Amz-Target"] = mode == "get" and "DynamoDB_20120810.GetItem" or "DynamoDB_20120810.PutItem",
		["Content-Type"] = "application/x-amz-json-1.0",
	}
	math.randomseed(os.time() * 1000 + id * 7919)
	misses, non200 = 0, 0
	if check then
		response = function(status, _, body)
			if status ~= 200 then
				non200 = non200 + 1
			elseif mode == "get" and not body:find('"Item"', 1, true) then
				misses = misses + 1
			end
		end
	end
end

-- The request bytes are built by hand (wrk.format walks the header table and formats each
-- request anew): the fixed head is made once, only the key and Content-Length change.
local head_get, head_put

local function head_for(target)
	return "POST / HTTP/1.1\r\nHost: " .. wrk.host .. ":" .. wrk.port .. "\r\n" ..
		"X-Amz-Target: DynamoDB_20120810." .. target .. "\r\n" ..
		"Content-Type: application/x-amz-json-1.0\r\nContent-Length: "
end

function request()
	local k = math.random(0, nkeys - 1)
	local body
	if mode == "get" then
		head_get = head_get or head_for("GetItem")
		body = '{"TableName":"bench","Key":{"PK":{"S":"c' .. k .. '"},"SK":{"S":"000000"}}}'
		return head_get .. #body .. "\r\n\r\n" .. body
	end
	head_put = head_put or head_for("PutItem")
	body = '{"TableName":"bench","Item":{"PK":{"S":"c' .. k .. '"},"SK":{"S":"000000"},"v":{"S":"' ..
		value .. '"}}}'
	return head_put .. #body .. "\r\n\r\n" .. body
end

function done(summary, latency, _)
	local misses_total, non200_total = 0, 0
	for _, th in ipairs(threads) do
		misses_total = misses_total + (th:get("misses") or 0)
		non200_total = non200_total + (th:get("non200") or 0)
	end
	local e = summary.errors
	local bad = math.max(e.status, non200_total)
	local secs = summary.duration / 1e6
	io.write(string.format(
		"RESULT requests=%d ops_s=%.0f p50_us=%d p99_us=%d errors=%d misses=%d secs=%.2f\n",
		summary.requests, (summary.requests - bad) / secs, latency:percentile(50),
		latency:percentile(99), bad + e.connect + e.read + e.write + e.timeout, misses_total, secs))
end
