-- wrk script: POST the AdmissionReview in $EVAC_REVIEW to the URL wrk is given; count non-200s.
local f = assert(io.open(os.getenv("EVAC_REVIEW"), "r"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

local failed = 0
function response(status, headers, body)
  if status ~= 200 then failed = failed + 1 end
end

function done(summary, latency, requests)
  io.write(string.format("non-200 answers: %d, socket errors: %d\n",
    failed, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout))
end
