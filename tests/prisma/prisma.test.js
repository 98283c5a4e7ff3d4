// Prisma ORM through its PlanetScale driver adapter (@prisma/adapter-planetscale on the
// real @planetscale/database driver), unmodified, against Ferry: every mapped type,
// relations, both kinds of transaction, raw queries with parameters and Prisma's
// error codes. The client is generated from schema.prisma (`npm run generate`).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Client } from '@planetscale/database'
import { PrismaPlanetScale } from '@prisma/adapter-planetscale'
import { PrismaClient, Prisma } from './generated/index.js'

const host = process.env.FERRY_HOST ?? '127.0.0.1'
const port = process.env.FERRY_PORT ?? '8443'
const user = process.env.FERRY_MYSQL_USER ?? 'ferry'
const password = process.env.FERRY_MYSQL_PASSWORD ?? 'ferry'
const url = `https://${user}:${password}@${host}:${port}`

const prisma = new PrismaClient({ adapter: new PrismaPlanetScale({ url }) })

before(async () => {
  // No migrations (they need Prisma's native schema engine): the tables by hand.
  const raw = new Client({ url })
  await raw.execute('DROP TABLE IF EXISTS prisma_post')
  await raw.execute('DROP TABLE IF EXISTS prisma_author')
  await raw.execute(`CREATE TABLE prisma_author (
    id INT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(191) NOT NULL UNIQUE,
    active BOOLEAN NOT NULL DEFAULT TRUE) DEFAULT CHARSET = utf8mb4`)
  await raw.execute(`CREATE TABLE prisma_post (
    id BIGINT AUTO_INCREMENT PRIMARY KEY, authorId INT NOT NULL, title VARCHAR(200) NOT NULL,
    price DECIMAL(10,2) NOT NULL, score DOUBLE NULL,
    createdAt DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), data JSON NULL, payload BLOB NULL,
    big BIGINT NOT NULL DEFAULT 0, FOREIGN KEY (authorId) REFERENCES prisma_author (id)) DEFAULT CHARSET = utf8mb4`)
})

after(() => prisma.$disconnect())

let n = 0
const email = (what) => `${what}-${process.pid}-${n++}@example.com`

test('every mapped type goes in and comes back exactly', async () => {
  const author = await prisma.prismaAuthor.create({ data: { email: email('types'), active: false } })
  const blob = Uint8Array.from([0, 1, 2, 0xfe, 0xff, 0x27, 0x5c])
  const when = new Date('2026-01-02T03:04:05.678Z')
  const created = await prisma.prismaPost.create({
    data: {
      authorId: author.id,
      title: "O'Brien \\ \"quoted\" — ✓ 🚀",
      price: new Prisma.Decimal('12345678.91'),
      score: 0.1 + 0.2,
      createdAt: when,
      data: { a: [1, 'x', null, true], nested: { deep: 1.5 } },
      payload: blob,
      big: 9007199254740993n // 2^53 + 1: lost if it passed through a JS number
    }
  })
  assert.equal(typeof created.id, 'bigint')
  const back = await prisma.prismaPost.findUniqueOrThrow({ where: { id: created.id } })
  assert.equal(back.title, "O'Brien \\ \"quoted\" — ✓ 🚀")
  assert.equal(back.price.toString(), '12345678.91')
  assert.equal(back.score, 0.1 + 0.2)
  assert.equal(back.createdAt.toISOString(), when.toISOString())
  assert.deepEqual(back.data, { a: [1, 'x', null, true], nested: { deep: 1.5 } })
  assert.deepEqual(Uint8Array.from(back.payload), blob)
  assert.equal(back.big, 9007199254740993n)
  const a = await prisma.prismaAuthor.findUniqueOrThrow({ where: { id: author.id } })
  assert.equal(a.active, false)
  // Filters on those types are built by Prisma and run by MySQL.
  const found = await prisma.prismaPost.findMany({
    where: { price: { gt: new Prisma.Decimal('12345678.90') }, big: { gte: 9007199254740993n }, authorId: author.id }
  })
  assert.deepEqual(found.map((p) => p.id), [created.id])
})

test('relations: a nested create, include and orderBy', async () => {
  const author = await prisma.prismaAuthor.create({
    data: {
      email: email('rel'),
      posts: { create: [{ title: 'b', price: 2 }, { title: 'a', price: 1 }, { title: 'c', price: 3 }] }
    },
    include: { posts: { orderBy: { title: 'asc' } } }
  })
  assert.deepEqual(author.posts.map((p) => p.title), ['a', 'b', 'c'])
  const counted = await prisma.prismaAuthor.findUniqueOrThrow({
    where: { id: author.id },
    select: { _count: { select: { posts: true } }, posts: { where: { price: { lt: 3 } }, select: { title: true } } }
  })
  assert.equal(counted._count.posts, 3)
  assert.deepEqual(counted.posts.map((p) => p.title).sort(), ['a', 'b'])
  const grouped = await prisma.prismaPost.aggregate({ where: { authorId: author.id }, _sum: { price: true }, _max: { title: true } })
  assert.equal(grouped._sum.price.toString(), '6')
  assert.equal(grouped._max.title, 'c')
})

test('an interactive transaction commits, and rolls back on a throw', async () => {
  const author = await prisma.prismaAuthor.create({ data: { email: email('tx') } })
  const count = () => prisma.prismaPost.count({ where: { authorId: author.id } })
  await assert.rejects(prisma.$transaction(async (tx) => {
    await tx.prismaPost.create({ data: { authorId: author.id, title: 'lost', price: 1 } })
    assert.equal(await tx.prismaPost.count({ where: { authorId: author.id } }), 1, 'seen inside')
    assert.equal(await count(), 0, 'not seen outside yet')
    throw new Error('app failure')
  }), /app failure/)
  assert.equal(await count(), 0)
  await prisma.$transaction(async (tx) => {
    await tx.prismaPost.create({ data: { authorId: author.id, title: 'kept', price: 1 } })
    await tx.prismaAuthor.update({ where: { id: author.id }, data: { active: false } })
  })
  assert.equal(await count(), 1)
  assert.equal((await prisma.prismaAuthor.findUniqueOrThrow({ where: { id: author.id } })).active, false)
})

test('a batch transaction is all or nothing', async () => {
  const author = await prisma.prismaAuthor.create({ data: { email: email('batch') } })
  const taken = email('taken')
  await prisma.prismaAuthor.create({ data: { email: taken } })
  await assert.rejects(prisma.$transaction([
    prisma.prismaPost.create({ data: { authorId: author.id, title: 'first', price: 1 } }),
    prisma.prismaAuthor.create({ data: { email: taken } }) // duplicate: the batch fails
  ]), (e) => e.code === 'P2002')
  assert.equal(await prisma.prismaPost.count({ where: { authorId: author.id } }), 0)
  await prisma.$transaction([
    prisma.prismaPost.create({ data: { authorId: author.id, title: 'one', price: 1 } }),
    prisma.prismaPost.create({ data: { authorId: author.id, title: 'two', price: 2 } })
  ])
  assert.equal(await prisma.prismaPost.count({ where: { authorId: author.id } }), 2)
})

test("Prisma's error codes: unique (P2002), foreign key (P2003), not found (P2025)", async () => {
  const e1 = email('dup')
  await prisma.prismaAuthor.create({ data: { email: e1 } })
  await assert.rejects(prisma.prismaAuthor.create({ data: { email: e1 } }), (e) => e.code === 'P2002')
  await assert.rejects(
    prisma.prismaPost.create({ data: { authorId: 2147483647, title: 'orphan', price: 1 } }),
    (e) => e.code === 'P2003')
  await assert.rejects(
    prisma.prismaAuthor.update({ where: { id: 2147483647 }, data: { active: false } }),
    (e) => e.code === 'P2025')
})

test('raw queries: parameters are values, never SQL', async () => {
  const evil = "x' OR '1'='1"
  const rows = await prisma.$queryRaw`SELECT ${evil} AS s, ${41} + 1 AS n, ${9007199254740993n} AS big`
  assert.equal(rows.length, 1)
  assert.equal(rows[0].s, evil)
  // 41 + 1 is INT on MariaDB and BIGINT on MySQL 8 (a JS bigint to Prisma): either way 42.
  assert.equal(BigInt(rows[0].n), 42n)
  assert.equal(rows[0].big, 9007199254740993n)
  const none = await prisma.$queryRaw`SELECT id FROM prisma_author WHERE email = ${evil}`
  assert.deepEqual(none, [])
  const changed = await prisma.$executeRaw`UPDATE prisma_author SET active = ${true} WHERE email = ${evil}`
  assert.equal(changed, 0)
})
