-- peers.lua -- the wrk script of `make bench-peers` (tests/tools/bench-peers.sh).
--
--   wrk -tT -cC -dD -s peers.lua URL -- SYSTEM MODE KEYS T [TAG | DONE]
--
-- SYSTEM  etcd      etcd's JSON gateway: POST /v3/kv/put {"key","value"} (base64),
--                   POST /v3/kv/range {"key", "serializable": true}
--         dynamodb  DynamoDB JSON 1.0 (Shoal, dynalite): POST / with X-Amz-Target
--                   DynamoDB_20120810.PutItem / GetItem / BatchWriteItem on table "bench"
--                   (hash key PK), an X-Amz-Date header and a dummy SigV4 Authorization
--                   header (dynalite refuses requests without both; Shoal without
--                   --http-credentials accepts any).
-- MODE    put   overwrite random keys (uniform over KEYS), value = TAG padded to 100 bytes
--         read  read random keys: etcd serializable range, DynamoDB GetItem (eventually
--               consistent); a 200 answer without the item counts as a miss
--         load  write every key once, in order (etcd: one put per key; DynamoDB:
--               BatchWriteItem of 25), value "load" padded to 100 bytes; thread i of T
--               writes batches i, i + T, ...; when its share is acknowledged it stops and
--               creates the file DONE.i (wrk itself runs until -d or SIGINT: the caller
--               waits for the T files, then sends SIGINT, and done() still reports)
-- Keys are "key%06d" (KEYS <= 1,000,000); items {"PK":{"S":key},"v":{"S":value}}.
--
-- done() prints one line the script parses:
--   RESULT requests=N ok=N ops_s=X p50_us=N p99_us=N non2xx=N socket_errors=N misses=N unprocessed=N
-- ops_s counts only 200 answers; and, if any, "FIRST_ERROR <status> <body>".

local threads = {}
local nthreads = 0

-- setup() runs in its own Lua state; wrk starts each thread (its init())
-- before it sets up the next one, so the thread count comes as an argument.
function setup(thread)
	thread:set("id", nthreads)
	nthreads = nthreads + 1
	table.insert(threads, thread)
end

local b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function b64(s)
	local out = {}
	for i = 1, #s, 3 do
		local a, b, c = s:byte(i, i + 2)
		local n = a * 65536 + (b or 0) * 256 + (c or 0)
		local q = {}
		for j = 3, 0, -1 do
			local k = math.floor(n / 64 ^ j) % 64
			q[#q + 1] = b64chars:sub(k + 1, k + 1)
		end
		if not b then q[3] = "=" end
		if not c then q[4] = "=" end
		out[#out + 1] = table.concat(q)
	end
	return table.concat(out)
end

local function pad100(tag)
	return (tag .. string.rep("x", 100)):sub(1, 100)
end

-- "key%06d" is three 3-byte groups, so its base64 is three 4-character pieces:
-- b64("key") .. b64(first three digits) .. b64(last three).
local b64key_prefix = b64("key")
local b64digits = {}
for d = 0, 999 do b64digits[d] = b64(string.format("%03d", d)) end

local function key(n) return string.format("key%06d", n) end
local function etcd_key(n)
	return b64key_prefix .. b64digits[math.floor(n / 1000)] .. b64digits[n % 1000]
end

local system, mode, nkeys, value, value64
local dyn_headers, etcd_headers
local batch, next_batch, my_batches, nthreads_total, done_file

function init(args)
	system, mode, nkeys = args[1], args[2], tonumber(args[3])
	assert(system == "etcd" or system == "dynamodb", "SYSTEM: etcd or dynamodb")
	assert(mode == "put" or mode == "read" or mode == "load", "MODE: put, read or load")
	assert(nkeys and nkeys >= 1 and nkeys <= 1000000, "KEYS: 1..1000000")
	nthreads_total = tonumber(args[4])
	assert(nthreads_total and nthreads_total >= 1, "T: wrk's thread count (-t)")
	value = pad100(mode == "load" and "load" or (args[5] or "put"))
	done_file = mode == "load" and args[5] and (args[5] .. "." .. id)
	value64 = b64(value)
	math.randomseed(os.time() * 1000 + id * 7919)
	requests, ok, non2xx, misses, unprocessed, first_error = 0, 0, 0, 0, 0, ""
	answered = 0
	local date = os.date("!%Y%m%dT%H%M%SZ")
	local function dyn(op)
		return {
			["Content-Type"] = "application/x-amz-json-1.0",
			["X-Amz-Target"] = "DynamoDB_20120810." .. op,
			["X-Amz-Date"] = date,
			["Authorization"] = "AWS4-HMAC-SHA256 Credential=bench/" .. date:sub(1, 8) ..
				"/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date;x-amz-target, " ..
				"Signature=0000000000000000000000000000000000000000000000000000000000000000",
		}
	end
	if system == "dynamodb" then
		dyn_headers = dyn(mode == "put" and "PutItem" or mode == "read" and "GetItem" or "BatchWriteItem")
	else
		etcd_headers = { ["Content-Type"] = "application/json" }
	end
	-- load: this thread writes batches id, id + T, id + 2T, ...
	-- etcd gets one put per key, its ordinary write: txns of 100 puts at full speed
	-- put thousands of keys into each 100 ms backend commit, and etcd 3.4's read
	-- buffer, which every later read copies (ConcurrentReadTx), keeps the size of
	-- the largest such batch: the loaded etcd then served half the reads.
	batch = system == "etcd" and 1 or 25
	local total = math.ceil(nkeys / batch)
	next_batch = id
	my_batches = 0
	for b = id, total - 1, nthreads_total do my_batches = my_batches + 1 end
	if mode == "load" and my_batches == 0 and done_file then io.open(done_file, "w"):close() end
end

local function load_request()
	local b = next_batch
	if b * batch >= nkeys then b = id end -- share done: repeat the first batch (idempotent)
	next_batch = next_batch + nthreads_total
	local lo, hi = b * batch, math.min((b + 1) * batch, nkeys) - 1
	local parts = {}
	if system == "etcd" then
		return wrk.format("POST", "/v3/kv/put", etcd_headers,
			'{"key":"' .. etcd_key(lo) .. '","value":"' .. value64 .. '"}')
	end
	for n = lo, hi do
		parts[#parts + 1] = '{"PutRequest":{"Item":{"PK":{"S":"' .. key(n) .. '"},"v":{"S":"' .. value .. '"}}}}'
	end
	return wrk.format("POST", "/", dyn_headers, '{"RequestItems":{"bench":[' .. table.concat(parts, ",") .. "]}}")
end

function request()
	requests = requests + 1
	if mode == "load" then return load_request() end
	local n = math.random(0, nkeys - 1)
	if system == "etcd" then
		if mode == "put" then
			return wrk.format("POST", "/v3/kv/put", etcd_headers,
				'{"key":"' .. etcd_key(n) .. '","value":"' .. value64 .. '"}')
		end
		return wrk.format("POST", "/v3/kv/range", etcd_headers,
			'{"key":"' .. etcd_key(n) .. '","serializable":true}')
	end
	if mode == "put" then
		return wrk.format("POST", "/", dyn_headers,
			'{"TableName":"bench","Item":{"PK":{"S":"' .. key(n) .. '"},"v":{"S":"' .. value .. '"}}}')
	end
	return wrk.format("POST", "/", dyn_headers, '{"TableName":"bench","Key":{"PK":{"S":"' .. key(n) .. '"}}}')
end

function response(status, headers, body)
	if status ~= 200 then
		non2xx = non2xx + 1
		if first_error == "" then first_error = status .. " " .. body:sub(1, 300):gsub("%s+", " ") end
	else
		ok = ok + 1
		if mode == "read" then
			-- etcd answers a missing key without "kvs"; DynamoDB without "Item"
			local mark = system == "etcd" and '"kvs"' or '"Item"'
			if not body:find(mark, 1, true) then misses = misses + 1 end
		elseif mode == "load" and system == "dynamodb" then
			if not body:find('"UnprocessedItems"%s*:%s*{%s*}') then unprocessed = unprocessed + 1 end
		end
	end
	if mode == "load" then
		answered = answered + 1
		if answered == my_batches then
			if done_file then io.open(done_file, "w"):close() end
			wrk.thread:stop()
		end
	end
end

function done(summary, latency, _)
	local t = { requests = 0, ok = 0, non2xx = 0, misses = 0, unprocessed = 0 }
	local err = ""
	for _, th in ipairs(threads) do
		for k in pairs(t) do t[k] = t[k] + (th:get(k) or 0) end
		local e = th:get("first_error")
		if err == "" and e and e ~= "" then err = e end
	end
	local e = summary.errors
	local secs = summary.duration / 1e6
	io.write(string.format(
		"RESULT requests=%d ok=%d ops_s=%.0f p50_us=%d p99_us=%d non2xx=%d socket_errors=%d " ..
		"misses=%d unprocessed=%d secs=%.2f\n",
		summary.requests, t.ok, t.ok / secs, latency:percentile(50), latency:percentile(99),
		math.max(t.non2xx, e.status), e.connect + e.read + e.write + e.timeout,
		t.misses, t.unprocessed, secs))
	if err ~= "" then io.write("FIRST_ERROR " .. err .. "\n") end
end
