-- wrk script for the MCP benchmark: POST one tools/call "echo" with every header protocol 2026-07-28
-- requires over HTTP, and check every answer: HTTP 200, the request's id, the echoed text.
-- done() prints one line, "WRK_JSON {...}", that bench/measure.py reads.

local text = "wrk says hello"
local body = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{'
  .. '"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  .. '"io.modelcontextprotocol/clientCapabilities":{}},'
  .. '"name":"echo","arguments":{"text":"' .. text .. '"}}}'

wrk.method = "POST"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  good = 0
  bad = 0
  sample = ""
end

function response(status, headers, reply)
  if status == 200
      and string.find(reply, '"id":7', 1, true)
      and string.find(reply, '"text":"' .. text .. '"', 1, true)
      and not string.find(reply, '"isError":true', 1, true) then
    good = good + 1
  else
    bad = bad + 1
    if sample == "" then
      sample = status .. " " .. string.sub(reply or "", 1, 200)
    end
  end
end

function done(summary, latency, requests)
  local good, bad, sample = 0, 0, ""
  for _, thread in ipairs(threads) do
    good = good + thread:get("good")
    bad = bad + thread:get("bad")
    if sample == "" then
      sample = thread:get("sample")
    end
  end
  local errors = summary.errors
  sample = string.gsub(sample, '[%c"\\]', "?")
  io.write(string.format('WRK_JSON {"requests":%d,"duration_us":%d,"good":%d,"bad":%d,'
    .. '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"status_errors":%d,"timeouts":%d,'
    .. '"p50_us":%d,"p99_us":%d,"sample":"%s"}\n',
    summary.requests, summary.duration, good, bad, errors.connect, errors.read, errors.write,
    errors.status, errors.timeout, latency:percentile(50), latency:percentile(99), sample))
end
