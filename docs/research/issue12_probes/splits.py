import math
SM=132
import sys
C0=float(sys.argv[1])
def choose(b,hk,G,sq,sk,d,tile_n,tile_m,bps,cap=128):
    rows=G*sq; mb=math.ceil(rows/tile_m); U=b*hk*mb; tiles=math.ceil(sk/tile_n); slots=SM*bps
    best=None; res=[]
    for s in range(1,min(cap,tiles)+1):
        per=math.ceil(tiles/s); s_eff=math.ceil(tiles/per)
        waves=math.ceil(U*s_eff/slots); ms=waves*(per+C0)
        res.append((s_eff,ms,U*s_eff))
    mn=min(r[1] for r in res)
    for s,ms,g in res:
        if ms<=mn*1.03: return dict(U=U,tiles=tiles,splits=s,grid=g,waves=g/slots,tiles_per_block=math.ceil(tiles/s),ideal=U*tiles/slots,makespan=ms,eff=U*tiles/slots/(waves*per))
rows=[(1,8192),(1,131072),(16,8192),(16,32768),(64,4096),(64,16384)]
for (b,sk) in rows:
    r=choose(b,8,4,1,sk,128,64,16,3); kv=2*b*sk*8*128*2/2**20
    print(f"b={b:3d} s_k={sk:6d} KV={kv:7.0f} MiB U={r['U']:4d} tiles={r['tiles']:5d} splits={r['splits']:3d} grid={r['grid']:5d} ({r['waves']:.2f} waves of 396) tiles/block={r['tiles_per_block']:4d} makespan eff={r['eff']:.2f}")
print("MQA h=32 hk=1 d128 G=32 -> tile_m 32 (2 warps), 3 blk/SM assumed")
for (b,sk) in rows:
    r=choose(b,1,32,1,sk,128,64,32,3); print(b,sk,r['U'],r['splits'],r['grid'],round(r['eff'],2),r['tiles_per_block'])
print("d64 tile_n 128 (K+V tile 32KiB)")
for (b,sk) in rows:
    r=choose(b,8,4,1,sk,64,128,16,3); print(b,sk,r['U'],r['splits'],r['grid'],round(r['eff'],2),r['tiles_per_block'])
print("s_q=4 G=4 -> 16 rows")
for (b,sk) in rows:
    r=choose(b,8,4,4,sk,128,64,16,3); print(b,sk,r['U'],r['splits'],r['grid'],round(r['eff'],2),r['tiles_per_block'])
