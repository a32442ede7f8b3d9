// kafkajs against logd's Kafka listener: one command per run, its
// parameters as one JSON argument, its outcome as one JSON object on stdout
// (cmd/logd/kafkajs_e2e_test.go checks it). A failure the test expects is
// part of the outcome, not an exit status: the script exits 0 unless it
// could not run at all.
//
//   node kafkajs.js produce '{"broker":"127.0.0.1:9092","topic":"t","count":300,"perSend":30}'
//   node kafkajs.js offsets '{"broker":...,"topic":"t","timestamp":1767225600000}'
//   node kafkajs.js produce-missing '{"broker":...,"topic":"nope"}'
//   node kafkajs.js admin-create '{"broker":...,"topic":"adm","partitions":3}'
//   node kafkajs.js admin-delete '{"broker":...,"topic":"adm"}'
//   node kafkajs.js group '{"broker":...,"topic":"t","partitions":4,"group":"g","members":2,
//     "produce":200,"prefix":"late","expect":400,"settleMs":500,"timeoutMs":60000,"fromBeginning":true}'
//   node kafkajs.js admin-offsets '{"broker":...,"group":"g","topic":"t","steps":[
//     {"set":[{"partition":0,"offset":"5"}]},{"reset":"earliest"},{"reset":"latest"}]}'
//   node kafkajs.js sasl '{"broker":...,"ca":"ca.crt","sasl":{"mechanism":"scram-sha-512","username":"u","password":"p"},
//     "topic":"t","group":"g","count":10,"timeoutMs":30000}'
//
// With "ca" every command connects over TLS trusting that CA file; with
// "sasl" it authenticates with that kafkajs SASL configuration.
'use strict'

const fs = require('fs')
const { Kafka, logLevel, CompressionTypes, ConfigResourceTypes } = require('kafkajs')

const [command, raw] = process.argv.slice(2)
const args = JSON.parse(raw || '{}')

// Log lines go to stderr, where the test shows them when it fails.
const kafka = new Kafka({
  clientId: 'logd-kafkajs-e2e',
  brokers: [args.broker],
  ssl: args.ca ? { ca: [fs.readFileSync(args.ca, 'utf8')] } : undefined,
  sasl: args.sasl,
  logLevel: logLevel.WARN,
  connectionTimeout: 5000,
  requestTimeout: 30000,
  retry: { initialRetryTime: 100, retries: args.retries ?? 5 },
  logCreator: () => ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  },
})

// describe flattens an error and its causes into what the test matches on.
function describe (e) {
  const out = { name: e.name, message: e.message, type: e.type, retriable: e.retriable }
  if (e.cause) out.cause = describe(e.cause)
  if (Array.isArray(e.errors)) out.errors = e.errors.map(describe)
  return out
}

// record i of the produce command: a key, a value and two headers that
// tell it apart from every other record.
function record (i) {
  return {
    key: `key-${i % 97}`,
    value: `kafkajs-${String(i).padStart(5, '0')}`,
    headers: { seq: String(i), origin: 'kafkajs' },
  }
}

// produce sends args.count records in sends of args.perSend, acks -1,
// every other send gzip-compressed, and reports each send's answer per
// partition; with args.idempotent, as an idempotent producer (one request
// in flight, as kafkajs asks of one).
async function produce () {
  const producer = args.idempotent
    ? kafka.producer({ allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 })
    : kafka.producer({ allowAutoTopicCreation: false, idempotent: false })
  await producer.connect()
  const sends = []
  try {
    for (let i = 0; i < args.count; i += args.perSend) {
      const messages = []
      for (let j = i; j < Math.min(i + args.perSend, args.count); j++) messages.push(record(j))
      const compression = (i / args.perSend) % 2 === 1 ? CompressionTypes.GZIP : CompressionTypes.None
      const meta = await producer.send({ topic: args.topic, acks: -1, compression, messages })
      sends.push({ first: i, count: messages.length, compression, meta })
    }
  } finally {
    await producer.disconnect()
  }
  return { sends }
}

// offsets lists each partition's offsets through the admin client
// (ListOffsets): earliest, latest, and by args.timestamp.
async function offsets () {
  const a = kafka.admin()
  await a.connect()
  try {
    return {
      offsets: await a.fetchTopicOffsets(args.topic),
      byTimestamp: await a.fetchTopicOffsetsByTimestamp(args.topic, args.timestamp),
    }
  } finally {
    await a.disconnect()
  }
}

// produceMissing sends one record to a topic that does not exist with
// kafkajs's defaults (it asks for auto-creation) and reports the error.
async function produceMissing () {
  const producer = kafka.producer()
  await producer.connect()
  try {
    await producer.send({ topic: args.topic, acks: -1, messages: [{ value: 'nowhere' }] })
    return { produced: true }
  } catch (e) {
    return { produced: false, error: describe(e) }
  } finally {
    await producer.disconnect()
  }
}

// adminCreate creates a topic with a setting and reads it back through
// Metadata and DescribeConfigs, replaces its settings (AlterConfigs) and
// reads them back, creates it again (kafkajs answers false when the topic
// exists), and creates a second topic with the defaults.
async function adminCreate () {
  const a = kafka.admin()
  await a.connect()
  const out = {}
  try {
    out.created = await a.createTopics({
      waitForLeaders: true,
      topics: [{ topic: args.topic, numPartitions: args.partitions, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
    })
    out.listed = (await a.listTopics()).includes(args.topic)
    const md = await a.fetchTopicMetadata({ topics: [args.topic] })
    out.partitions = md.topics[0].partitions.map(p => ({ partition: p.partitionId, leader: p.leader, error: p.partitionErrorCode }))
    const cfg = await a.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: args.topic }] })
    const entry = cfg.resources[0].configEntries.find(c => c.configName === 'retention.ms')
    out.retentionMs = entry ? entry.configValue : null
    // AlterConfigs replaces the topic's settings: retention.ms, not
    // listed, goes back to its default.
    await a.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: args.topic, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }] })
    const altered = await a.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: args.topic }] })
    out.altered = Object.fromEntries(altered.resources[0].configEntries
      .filter(c => ['cleanup.policy', 'retention.ms'].includes(c.configName))
      .map(c => [c.configName, c.configValue]))
    out.createdAgain = await a.createTopics({ topics: [{ topic: args.topic, numPartitions: args.partitions }] })
    out.createdDefault = await a.createTopics({ waitForLeaders: true, topics: [{ topic: args.topic + '-default' }] })
  } finally {
    await a.disconnect()
  }
  return out
}

// adminDelete deletes the topics adminCreate made, lists what is left of
// them, and tries AlterConfigs on the deleted topic.
async function adminDelete () {
  const a = kafka.admin()
  await a.connect()
  const out = {}
  try {
    await a.deleteTopics({ topics: [args.topic, args.topic + '-default'], timeout: 10000 })
    out.left = (await a.listTopics()).filter(t => t.startsWith(args.topic))
    try {
      await a.alterConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: args.topic, configEntries: [{ name: 'retention.ms', value: '1' }] }] })
      out.alterConfigs = { name: 'ok' }
    } catch (e) {
      out.alterConfigs = describe(e)
    }
  } finally {
    await a.disconnect()
  }
  return out
}

// group runs args.members consumers in group args.group on args.topic,
// from the earliest offset where the group has none (the latest with
// args.fromBeginning false). Once every member has
// an assignment and together they hold args.partitions partitions, a
// producer writes args.produce more records (values args.prefix-00000...).
// The consumers stop when they consumed args.expect records between them
// and args.settleMs more passed (time for a duplicate to show), or at
// args.timeoutMs; kafkajs commits after each batch, and they leave.
async function group () {
  const members = []
  for (let m = 0; m < args.members; m++) {
    const consumer = kafka.consumer({
      groupId: args.group,
      sessionTimeout: 10000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 500,
      maxWaitTimeInMs: 200,
    })
    const member = { consumer, joins: [], records: [], assigned: 0 }
    consumer.on(consumer.events.GROUP_JOIN, e => {
      const a = e.payload.memberAssignment[args.topic] || []
      member.assigned = a.length
      member.joins.push({ memberId: e.payload.memberId, leader: e.payload.isLeader, partitions: a })
    })
    members.push(member)
  }
  let consumed = 0
  const started = Date.now()
  await Promise.all(members.map(async member => {
    await member.consumer.connect()
    await member.consumer.subscribe({ topics: [args.topic], fromBeginning: args.fromBeginning ?? true })
    await member.consumer.run({
      eachMessage: async ({ partition, message }) => {
        member.records.push({ partition, offset: Number(message.offset), value: message.value.toString() })
        consumed++
      },
    })
  }))
  const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
  const until = async cond => {
    while (!cond() && Date.now() - started < args.timeoutMs) await sleep(20)
    return cond()
  }
  const out = {}
  out.assigned = await until(() => members.every(m => m.assigned > 0) &&
    members.reduce((n, m) => n + m.assigned, 0) === args.partitions)
  if (out.assigned && args.produce > 0) {
    const producer = kafka.producer({ allowAutoTopicCreation: false })
    await producer.connect()
    try {
      for (let i = 0; i < args.produce; i += 50) {
        const messages = []
        for (let j = i; j < Math.min(i + 50, args.produce); j++) {
          messages.push({ key: `key-${j}`, value: `${args.prefix}-${String(j).padStart(5, '0')}` })
        }
        await producer.send({ topic: args.topic, acks: -1, messages })
      }
    } finally {
      await producer.disconnect()
    }
  }
  out.complete = await until(() => consumed >= args.expect)
  await sleep(args.settleMs)
  await Promise.all(members.map(m => m.consumer.disconnect()))
  out.members = members.map(m => ({ joins: m.joins, records: m.records }))
  return out
}

// adminOffsets runs args.steps against group args.group on args.topic
// with the admin client: {"set": [{partition, offset}]} is setOffsets,
// {"reset": "earliest"|"latest"} is resetOffsets; after each, it reads the
// group's offsets back (fetchOffsets). A step that fails, or takes longer
// than 20 s (kafkajs waits forever for a commit it cannot make), ends the
// run with its error.
async function adminOffsets () {
  const a = kafka.admin()
  await a.connect()
  const out = { steps: [] }
  const within = async (p, ms) => {
    let timer
    const late = new Promise((resolve, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms) })
    try {
      return await Promise.race([p, late])
    } finally {
      clearTimeout(timer)
    }
  }
  try {
    for (const step of args.steps) {
      try {
        if (step.set) {
          await within(a.setOffsets({ groupId: args.group, topic: args.topic, partitions: step.set }), 20000)
        } else {
          await within(a.resetOffsets({ groupId: args.group, topic: args.topic, earliest: step.reset === 'earliest' }), 20000)
        }
      } catch (e) {
        out.error = describe(e)
        break
      }
      const [t] = await a.fetchOffsets({ groupId: args.group, topics: [args.topic] })
      out.steps.push(t.partitions.map(p => ({ partition: p.partition, offset: p.offset })).sort((x, y) => x.partition - y.partition))
    }
  } finally {
    await a.disconnect()
  }
  return out
}

// sasl produces args.count records to args.topic and consumes them back
// in group args.group, authenticated as args.sasl says; a failure (a
// refused authentication, a refused topic) is the outcome's error.
async function sasl () {
  const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: false })
  const consumer = kafka.consumer({ groupId: args.group, retry: { retries: 0 } })
  const out = { produced: 0, consumed: [] }
  try {
    await producer.connect()
    const messages = []
    for (let i = 0; i < args.count; i++) messages.push({ value: `${args.sasl.username}-${i}` })
    await producer.send({ topic: args.topic, acks: -1, messages })
    out.produced = messages.length
    await consumer.connect()
    await consumer.subscribe({ topic: args.topic, fromBeginning: true })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${out.consumed.length} of ${args.count}`)), args.timeoutMs)
      consumer.run({
        eachMessage: async ({ message }) => {
          out.consumed.push(message.value.toString())
          if (out.consumed.length >= args.count) {
            clearTimeout(timer)
            resolve()
          }
        },
      }).catch(reject)
    })
  } catch (e) {
    out.error = describe(e)
  } finally {
    await producer.disconnect()
    await consumer.disconnect()
  }
  return out
}

const commands = { sasl, produce, offsets, 'produce-missing': produceMissing, 'admin-create': adminCreate, 'admin-delete': adminDelete, group, 'admin-offsets': adminOffsets }

async function main () {
  const fn = commands[command]
  if (!fn) throw new Error(`unknown command ${command}`)
  process.stdout.write(JSON.stringify(await fn()) + '\n')
}

main().catch(e => {
  process.stderr.write(`kafkajs.js ${command}: ${e.stack || e}\n${JSON.stringify(describe(e))}\n`)
  process.exit(1)
})
