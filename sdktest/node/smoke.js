// A smoke test of Mayfly with the official Couchbase Node.js SDK, unmodified
// (it wraps Couchbase's C++ core, as the Python SDK does, and logs in with
// SCRAM): connect, upsert with an expiry, get it back with its expiry, and
// query a view made through the SDK's view index manager. sdktest's
// TestNodeSDK starts a server and runs it with:
//   MAYFLY_CONNSTR  couchbase://127.0.0.1:PORT (the KV port)
//   MAYFLY_USER, MAYFLY_PASSWORD, MAYFLY_BUCKET
// It prints "ok" and exits 0, or prints what went wrong and exits 1.
'use strict'

const couchbase = require('couchbase')

function check(cond, what) {
  if (!cond) {
    throw new Error('check failed: ' + what)
  }
}

async function main() {
  const env = process.env
  const cluster = await couchbase.connect(env.MAYFLY_CONNSTR, {
    username: env.MAYFLY_USER,
    password: env.MAYFLY_PASSWORD,
    timeouts: { connectTimeout: 30000, kvTimeout: 30000, viewTimeout: 60000, managementTimeout: 30000 },
  })
  try {
    const bucket = cluster.bucket(env.MAYFLY_BUCKET)
    const coll = bucket.defaultCollection()

    const before = Math.floor(Date.now() / 1000)
    await coll.upsert('node-1', { type: 'hotel', name: 'Harbour Inn', stars: 3 }, { expiry: 3600 })
    await coll.upsert('node-2', { type: 'hotel', name: 'Mountain Lodge', stars: 4 })
    const got = await coll.get('node-1', { withExpiry: true })
    check(got.content.name === 'Harbour Inn', 'get content: ' + JSON.stringify(got.content))
    const exp = got.expiryTime instanceof Date ? got.expiryTime.getTime() / 1000 : got.expiryTime
    check(typeof exp === 'number' && exp >= before + 3500 && exp <= before + 3700, 'expiry: ' + got.expiryTime)

    let missing = null
    try {
      await coll.get('no-such-key')
    } catch (e) {
      missing = e
    }
    check(missing instanceof couchbase.DocumentNotFoundError, 'get of a missing key: ' + missing)

    const ddoc = new couchbase.DesignDocument('hotels', {
      by_stars: new couchbase.DesignDocumentView({
        map: 'function (doc, meta) { if (doc.type == "hotel") { emit(doc.stars, doc.name); } }',
        reduce: '_count',
      }),
    })
    await bucket.viewIndexes().upsertDesignDocument(ddoc, couchbase.DesignDocumentNamespace.Production)
    const rows = await bucket.viewQuery('hotels', 'by_stars', {
      scanConsistency: couchbase.ViewScanConsistency.RequestPlus,
      reduce: false,
    })
    const seen = rows.rows.map((r) => [r.id, r.key, r.value])
    check(JSON.stringify(seen) === JSON.stringify([['node-1', 3, 'Harbour Inn'], ['node-2', 4, 'Mountain Lodge']]),
      'view rows: ' + JSON.stringify(seen))
    const count = await bucket.viewQuery('hotels', 'by_stars', { scanConsistency: couchbase.ViewScanConsistency.RequestPlus })
    check(count.rows.length === 1 && count.rows[0].value === 2, 'view reduce: ' + JSON.stringify(count.rows))
    console.log('ok')
  } finally {
    await cluster.close()
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e)
  if (e && e.cause) {
    console.error('cause:', e.cause)
  }
  if (e && e.context) {
    console.error('context:', JSON.stringify(e.context))
  }
  process.exit(1)
})
