#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
__global__ void ch(const unsigned*p,unsigned j,int n,unsigned*o,long long*t){long long c=clock64();for(int k=0;k<n;k++)j=p[j];*t=clock64()-c;*o=j;}
int main(){size_t B=4ull<<30;unsigned*p,*o;cudaMalloc(&p,B);cudaMalloc(&o,64);long long*t,ht;cudaMalloc(&t,8);int clk;cudaDeviceGetAttribute(&clk,cudaDevAttrClockRate,0);
for(int sp:{32,512,4096,65536}){size_t N=B/4/(sp/4);int M=(int)std::min<size_t>(N,1<<20);std::vector<unsigned>h(B/4,0),perm(M);for(int i=0;i<M;i++)perm[i]=(unsigned)((size_t)i*(N/M));std::shuffle(perm.begin(),perm.end(),std::mt19937(1));
for(int i=0;i<M;i++)h[(size_t)perm[i]*(sp/4)]=perm[(i+1)%M]*(sp/4);cudaMemcpy(p,h.data(),B,cudaMemcpyHostToDevice);
for(int r=0;r<2;r++){ch<<<1,1>>>(p,perm[r*200000]*(sp/4),20000,o,t);cudaMemcpy(&ht,t,8,cudaMemcpyDeviceToHost);printf("spacing %d B over 4 GiB, run %d (%s): %.0f cycles/load = %.0f ns\n",sp,r,r?"other chain part":"cold",ht/20000.,ht/20000./(clk/1e6));}
ch<<<1,1>>>(p,perm[0]*(sp/4),20000,o,t);cudaMemcpy(&ht,t,8,cudaMemcpyDeviceToHost);printf("spacing %d B rerun same 20000 nodes (L2-resident 2.5MB lines): %.0f cycles = %.0f ns\n",sp,ht/20000.,ht/20000./(clk/1e6));}}
